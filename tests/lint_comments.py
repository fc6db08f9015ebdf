#!/usr/bin/env python3
"""The comment lint (test `lint_comments`): code comments say what is true and why; figures live
in bench/results/ with the command that produced them.

Reads the comments of the C++ sources and headers (// and /* */, not string or character literals)
under core/ ops/ nn/ distributed/ examples/ bench/ tests/ python/ fuzz/ cmake/, and the # comments
of every CMakeLists.txt and *.cmake file (build/ and hidden folders skipped), and fails, printing
file:line, the reason and the text, on

1. a quoted time: a number or range, or "a few", "a couple of", "several", "tens of", "hundreds
   of", followed by ns, us, µs, ms, s, sec, seconds, min, minutes or hours. A duration that is a
   rule, not a measurement, passes when a rule word (after, every, at least, at most, up to, >=,
   <=, timeout, sleep(s), wait(s), default, limit, budget, grace) stands in the 15 characters
   before the number, within its sentence, or `later`, `timeout`, `(is the) limit` or `by default`
   follows it: "a timeout of 5 s", "after 20 ms", "5 minutes by default", "aborts 5 s later".
   A bare `s` needs a space after the number ("5 s"; "1s" and "3s" are plurals) and must not be
   followed by an operator or a closing parenthesis (the math "(1 - 2 s)").
2. a quoted rate: a number followed by <unit>/s (GFLOP/s, GB/s, MiB/s, Gbit/s, it/s, ...), GFLOPS,
   TFLOPS or flops.
3. a speed ratio: a number, range or percentage followed by x, × or % and then faster, slower,
   speed-up or quicker ("2x faster", "20% slower"), or by "the (...) time/rate/speed" ("12x the
   read time"); "N times faster/slower" (N a numeral or two ... ten); or a ratio written alone with
   a fraction or a range ("1.8x", "2-3x", "3.5-4.6x"). A whole "2x" alone is left to math
   ("dy/dx = 2x") and to sizes ("2x the header's bytes").
4. a reference to an unrecorded benchmark run: "a harness" or "harness timing" (a program that is
   not in the repository; the libFuzzer and parity harnesses are files of it and pass), "bench
   run", "benchmark run".
5. a repository path that does not exist: a token like `ops/detail/pointwise.hpp`,
   `core/autograd.cpp:751` (the line must exist too), `docs/design.md#anchor`, `ops/*.hpp` or `ops/<header>.hpp` (a glob
   must match a file) or `ops/detail/`, whose first folder is a top-level folder of the repository
   (build/ excepted: it is generated) or a folder next to the commenting file (`detail/x.hpp` in
   ops/ is ops/detail/x.hpp; either reading may hold). `bench/conv_step` may name the program built
   from bench/conv_step.cpp; `xgrad/...` (the installed include path) is the repository root, and
   `xgrad/xgrad.hpp` is generated from cmake/xgrad.hpp.in. Paths of other projects (aten/...,
   torch/...) start with no folder of ours, and ./program is a path in the user's folder: neither
   is checked.

Deliberately not flagged: sizes (64 KB), counts, cycles and latencies of an instruction or a cache
level (hardware facts from the vendors' manuals, not our runs), percentages that are not a speed
comparison (accuracies, shares of instructions), and math. A comparison without a figure
("measured faster", "several times slower") passes: a comment may say which way a measurement went
and point to bench/results/. There is no opt-out marker: reword the comment.

Usage: lint_comments.py [ROOT]     lint the repository at ROOT (default: this file's folder's parent)
       lint_comments.py --self-test
"""
import glob
import os
import re
import sys

CPP_DIRS = ['core', 'ops', 'nn', 'distributed', 'examples', 'bench', 'tests', 'python', 'fuzz', 'cmake']
CPP_SUFFIXES = ('.cpp', '.hpp', '.h', '.cc', '.hh', '.cxx', '.ipp', '.inl', '.hpp.in')
# Generated, not sources (.gitignore): the build folders and out/, where the examples write (a path
# such as out/bo in a comment is then a ratio, not a file).
SKIP_DIRS = {'build', 'out', '.git', '__pycache__'}

# ---- comments -------------------------------------------------------------------------------------

RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')


def cpp_comments(text):
    """[(line, text)] for every line of every // or /* */ comment of C++ source `text`."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            i += 1
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j]))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split('\n')):
                out.append((line + k, part))
            line += text.count('\n', i, j)
            i = j + 2
        elif (c in 'uULR' and RAW_STRING.match(text, i)
              and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            m = RAW_STRING.match(text, i)
            end = ')' + m.group(1) + '"'
            j = text.find(end, m.end())
            j = n if j < 0 else j
            line += text.count('\n', i, j)
            i = j + len(end)
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # 1'000: a digit separator
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            line += text.count('\n', i, min(j, n))
            i = j + 1
        else:
            i += 1
    return out


def cmake_comments(text):
    """[(line, text)] for every line of every # or #[[ ]] comment of CMake source `text`."""
    out, i, n, line = [], 0, len(text), 1
    bracket = re.compile(r'#?\[(=*)\[')
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            i += 1
        elif c == '#':
            m = bracket.match(text, i)
            if m and text[i + 1:i + 2] == '[':  # #[[ bracket comment ]]
                end = ']' + m.group(1) + ']'
                j = text.find(end, m.end())
                j = n if j < 0 else j
                for k, part in enumerate(text[m.end():j].split('\n')):
                    out.append((line + k, part))
                line += text.count('\n', i, j)
                i = j + len(end)
            else:
                j = text.find('\n', i)
                j = n if j < 0 else j
                out.append((line, text[i + 1:j]))
                i = j
        elif c == '[' and bracket.match(text, i):  # [[ bracket argument ]]
            m = bracket.match(text, i)
            end = ']' + m.group(1) + ']'
            j = text.find(end, m.end())
            j = n if j < 0 else j
            line += text.count('\n', i, j)
            i = j + len(end)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            line += text.count('\n', i, min(j, n))
            i = j + 1
        else:
            i += 1
    return out


# ---- figures --------------------------------------------------------------------------------------

NUM = r'(?<![\w.])\d+(?:[.,]\d+)*(?:\s*(?:-|–|to)\s*\d+(?:\.\d+)?)?'
FEW = r'\b(?:a few|a couple of|several|tens of|hundreds of)'
TIME = re.compile('(?:' + NUM + '|' + FEW + r')\s*(?:~\s*)?(?:ns|us|µs|μs|ms|secs?|seconds?|min|minutes?|hours?)\b'
                  r'|' + NUM + r'\s+s\b(?!\s*[-+*/^)=])')
RULE_BEFORE = re.compile(r'(?:>=|<=|\b(?:after|every|at least|at most|up to|time-?outs?|sleeps?|waits?|default|'
                         r'limit|budget|grace)\b)[^.;:]{0,15}$', re.I)
RULE_AFTER = re.compile(r'^\s*(?:later|time-?outs?|(?:is )?(?:the )?limit|by default)\b', re.I)
RATE = re.compile(NUM + r'\s*(?:[KMGTP]?i?(?:B|bit|bits|byte|bytes|FLOP|flop|op|ops|it|elements?|rows?)/s|'
                  r'[GT]?FLOPS|[GT]?flops)\b')
RATIO = re.compile(NUM + r'\s*(?:x|×|%)\s+(?:faster|slower|speed-?ups?|quicker)\b'
                   r'|(?<![\w.])\d+(?:\.\d+)?\s*(?:-|–)\s*\d+(?:\.\d+)?\s*(?:x|×)(?![\w\d(])'
                   r'|(?<![\w.])\d+\.\d+\s*(?:x|×)(?![\w\d(])'
                   r'|' + NUM + r'\s*(?:x|×)\s+the\s+(?:\w+\s+)?(?:time|rate|speed)\b'
                   r'|(?:' + NUM + r'|\b(?:two|three|four|five|six|seven|eight|nine|ten|twenty|a hundred))\s+times\s+'
                   r'(?:faster|slower|quicker|as fast|as slow)\b'
                   r'|' + NUM + r'\s*%\s+of\s+(?:(?:its|the|an?|our|their)\s+)?(?:[\w\']+\s+){0,3}'
                   r'(?:rate|peak|speed|throughput|time|samples|cycles)\b'
                   r'|' + NUM + r'\s*%\s+(?:\w+\s+){0,3}(?:trailed|trails|lagged|lags)\b', re.I)
RUN = re.compile(r'\b(?:an?|one|own|ad[- ]hoc|throwaway)\s+(?:\w+\s+)?harness\b|\bharness(?:es)?\s+(?:timings?|timed)\b'
                 r'|\bbench(?:mark)?\s+runs?\b', re.I)


def figure_problems(text):
    """The reasons (rules 1-4) why comment text `text` quotes a measurement; [] if none."""
    found = []
    for m in TIME.finditer(text):
        if RULE_BEFORE.search(text[:m.start()]) or RULE_AFTER.match(text[m.end():]):
            continue
        found.append(f'a time ("{m.group(0)}")')
    found += [f'a rate ("{m.group(0)}")' for m in RATE.finditer(text)]
    found += [f'a speed ratio ("{m.group(0)}")' for m in RATIO.finditer(text)]
    found += [f'a benchmark run ("{m.group(0)}")' for m in RUN.finditer(text)]
    return found


# ---- paths ----------------------------------------------------------------------------------------

PATH = re.compile(r'(?<![\w./:@-])((?:[A-Za-z0-9_.+*-]+/)+[A-Za-z0-9_.+*-]*)(?::(\d+))?')


def path_problems(text, root, rel_dir, top_dirs):
    """Repository paths in `text` that do not exist (rule 5); rel_dir is the commenting file's folder."""
    found = []
    text = re.sub(r'<[a-z_]+>', '*', text)  # a placeholder, ops/<header>.hpp, is a glob
    for m in PATH.finditer(text):
        parts = m.group(1).rstrip('.,').split('/')
        line = m.group(2)
        if parts[0] == 'xgrad':
            parts = parts[1:]
            if parts == ['xgrad.hpp']:
                parts = ['cmake', 'xgrad.hpp.in']
        if not parts or parts[0] in SKIP_DIRS:
            continue
        bases = []
        if parts[0] in top_dirs:
            bases.append(root)
        if rel_dir and parts[0] not in ('.', '..') and os.path.isdir(os.path.join(root, rel_dir, parts[0])):
            bases.append(os.path.join(root, rel_dir))
        if not bases:
            continue  # not one of our folders: another project's path, a ratio, a unit, ./program
        rel = '/'.join(p for p in parts if p)
        matches = []
        for base in bases:
            full = os.path.join(base, rel)
            if any(ch in rel for ch in '*?['):
                matches += glob.glob(full)
            else:  # bench/conv_step: the program built from bench/conv_step.cpp
                matches += [p for p in (full, full + '.cpp') if os.path.exists(p)]
        if not matches:
            found.append(f'a path that does not exist ("{m.group(0)}")')
        elif line and os.path.isfile(matches[0]):
            with open(matches[0], encoding='utf-8', errors='replace') as f:
                if int(line) > sum(1 for _ in f):
                    found.append(f'a line past the end of the file ("{m.group(0)}")')
    return found


# ---- the repository -------------------------------------------------------------------------------

def sources(root):
    """(relative path, 'cpp' or 'cmake') of every file the lint reads."""
    out = []
    for top in sorted(os.listdir(root)):
        if top in SKIP_DIRS or top.startswith('.'):
            continue
        path = os.path.join(root, top)
        if os.path.isfile(path):
            if top == 'CMakeLists.txt' or top.endswith('.cmake'):
                out.append((top, 'cmake'))
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith('.'))
            for name in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if name == 'CMakeLists.txt' or name.endswith(('.cmake', '.cmake.in')):
                    out.append((rel, 'cmake'))
                elif top in CPP_DIRS and name.endswith(CPP_SUFFIXES):
                    out.append((rel, 'cpp'))
    return out


def lint(root):
    """[(file, line, comment text, [reasons])] of every offending comment line under `root`."""
    top_dirs = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and d not in SKIP_DIRS}
    problems = []
    for rel, kind in sources(root):
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
            text = f.read()
        comments = cpp_comments(text) if kind == 'cpp' else cmake_comments(text)
        for line, comment in comments:
            reasons = figure_problems(comment) + path_problems(comment, root, os.path.dirname(rel), top_dirs)
            if reasons:
                problems.append((rel, line, comment.strip(), reasons))
    return problems


# ---- self-test ------------------------------------------------------------------------------------

def self_test():
    bad = [
        'forward 15 ms against 187 ms in place',
        'kc = 384 was not faster (1024^3 float32 95 against 100-102 GFLOP/s)',
        'the scanner reads 0.4-2 GB/s',
        'maximum\'s backward was 3.5-4.6x slower',
        'measured 2x slower than its blocking MPI_Allreduce',
        'a 1.8x speed-up',
        'cost 20% slower',
        'Measured (a harness timing conv2d alone, alternating builds)',
        'lookup about half its speed (a harness, 1 thread)',
        'the single file took 39 s',
        'took 6 s of a warm configure',
        '0.66-0.80 against 0.88-1.07 ms',
        'measured ~0.015 us per byte in release',
        'numbers from the last bench run',
        'one vectorised pass (a few ms for 100 MB)',
        'took 12x the read time for 950k entries',
        'trained about five times slower',
        'parse 10-20 times slower',
        'OpenBLAS reaches only ~60-72% of its dense rate',
        'the ~15-20% the tiles trailed libxsmm by',
        'a scalar loop, 1.7% of an embedding lookup\'s samples',
    ]
    good = [
        'a timeout of 5 s', 'aborts the job 5 s later', '5 minutes by default', 'after 20 ms a waiting rank sleeps',
        'moves them on every 100 µs', 'a warm-up of at least 0.3 s', 'each of as many calls as last >= 20 ms',
        'rank 1 sleeps 60 s without leaving', '30 s is the limit for these',
        'the B panel (512 x 32 floats, 64 KB) streams from L2', 'two 512-bit FMA ports of latency 4',
        'dy/dx = 2x', 'dc/dx = 2 + 8x', 'sigmoid: s (1 - s) (1 - 2 s)', 'leading 1s dropped',
        'the first of the tied 3s',
        'libFuzzer harness for the .npy reader', 'the parity harness backpropagates into it',
        'micro-tiles of 8 x 2 vectors', '64x64 blocks at density 1/64', 'reach 84.2-85.3% (seeds 0-2)',
        'x * 2.0 is float32', 'a 2 x 2 grid', 'the tile measured fastest (bench/results/gemm.csv)',
        'For each case the harness runs ours', 'at most about 2x the header\'s bytes',
        'an L1 hit costs 4 cycles of latency', 'rounded up (at most 12.5% of the size)',
        'a line every 10% of the steps', 'measured several times slower (bench/results/tuning_notes.md)',
    ]
    failures = [f'not flagged: {t!r}' for t in bad if not figure_problems(t)]
    failures += [f'flagged: {t!r}: {figure_problems(t)}' for t in good if figure_problems(t)]

    cpp = ('int a = 1; // took 5 ms\nconst char* s = "took 5 ms"; char q = \'"\';\n'
           'auto r = R"(// 7 ms)"; int b = 1\'000; /* first\n  took 9 ms */ int c;\n')
    got = [(line, t) for line, t in cpp_comments(cpp) if figure_problems(t)]
    if got != [(1, ' took 5 ms'), (4, '  took 9 ms ')]:
        failures.append(f'C++ comments: {got}')
    cm = 'set(A "# 5 ms")  # took 5 ms\n#[[ first\ntook 9 ms ]]\nmessage([[# 7 ms]])\n'
    got = [(line, t) for line, t in cmake_comments(cm) if figure_problems(t)]
    if got != [(1, ' took 5 ms'), (3, 'took 9 ms ')]:
        failures.append(f'CMake comments: {got}')

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    top = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and d not in SKIP_DIRS}
    paths_good = 'see tests/lint_comments.py:1, tests/*.py, tests/<name>.py, xgrad/tests/ and docs/, aten/src/x.cpp, GFLOP/s'
    paths_bad = ['see tests/no_such_file.hpp', 'tests/lint_comments.py:999999', 'tests/no_such_*.py']
    if path_problems(paths_good, root, 'tests', top):
        failures.append(f'paths flagged: {path_problems(paths_good, root, "tests", top)}')
    failures += [f'path not flagged: {t!r}' for t in paths_bad if not path_problems(t, root, 'tests', top)]
    if path_problems('lint_comments.py and consumer/main.cpp', root, 'tests', top):
        failures.append('a path relative to the commenting folder was flagged')
    if not path_problems('consumer/no_such.cpp', root, 'tests', top):
        failures.append('a missing path relative to the commenting folder was not flagged')

    for f in failures:
        print(f'self-test: {f}')
    print('self-test:', 'FAILED' if failures else 'passed')
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    problems = lint(root)
    for rel, line, text, reasons in problems:
        print(f'{rel}:{line}: {"; ".join(reasons)}: {text}')
    if problems:
        print(f'\n{len(problems)} comment line(s) quote a measurement or point to a path that does not exist.\n'
              'Say the rule or the reason in the comment, and put the figures, with the command that produced\n'
              'them, in bench/results/ (tests/lint_comments.py states the rules).')
        return 1
    print('lint_comments: no comment quotes a time, a rate or a benchmark run; every path mentioned exists')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
