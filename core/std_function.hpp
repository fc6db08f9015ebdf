#pragma once
// std::function, for the public headers that take callables (hooks, closures, deleters).
// libstdc++'s <functional> also defines the C++17 searchers, and with them includes <unordered_map>
// and the whole of <bits/stl_algo.h> in every file that includes an xgrad header; std::function itself
// is in its <bits/std_function.h>, which libstdc++'s own <future> and <regex> include the same way.
// Other standard libraries get <functional>. Files that use anything else of <functional> include it.
#include <version>
#if defined(__GLIBCXX__) && __has_include(<bits/std_function.h>)
#include <bits/std_function.h>
#else
#include <functional>
#endif
