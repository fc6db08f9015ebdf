// The op table's entries for ops/resample_conv.hpp (op_table_common.hpp, op_table.cpp).
#include "op_table_common.hpp"

namespace xgrad::test::table {

// resample_conv with the seed's cos^2 response and with a sampled (cubic) response, as dense T
// (inline variables, not in the anonymous namespace: GCC 12 would fold them into std::string's operator+
// below and warn of bounds it misreads, -Warray-bounds).
inline const char* kTorchCos2 =
    "import math\n"
    "d = coarse[:, :, None] - x[None, None, :]\n"
    "T = torch.where((d >= -w / 2) & (d <= w / 2), torch.cos(math.pi * d / w) ** 2, torch.zeros((), dtype=d.dtype))\n"
    "out = torch.einsum('nab,...nb->...na', T, f)\n";
inline const char* kTorchSampled =
    "K = v.shape[0]\n"
    "delta = (hi - lo) / (K - 1)\n"
    "d = coarse[:, :, None] - x[None, None, :]\n"
    "u = (d - lo) / delta\n"
    "i = torch.clamp(torch.floor(u.detach()), 0, K - 2).long()\n"
    "s = u - i.to(u.dtype)\n"
    "vx = torch.cat([(2 * v[0] - v[1]).reshape(1), v, (2 * v[-1] - v[-2]).reshape(1)])\n"
    "vm, v0, v1, v2 = vx[i], vx[i + 1], vx[i + 2], vx[i + 3]\n"
    "r = 0.5 * (2 * v0 + (v1 - vm) * s + (2 * vm - 5 * v0 + 4 * v1 - v2) * s ** 2 + (3 * v0 - vm - 3 * v1 + v2) * s ** "
    "3)\n"
    "T = torch.where((d >= lo) & (d <= hi), r, torch.zeros((), dtype=d.dtype))\n"
    "out = torch.einsum('nab,...nb->...na', T, f)\n";

namespace {

Response cos2(double w) {  // with r' and r'' (second derivatives in the coarse points: create_graph)
  return Response::callable([w](double d) { return std::pow(std::cos(M_PI * d / w), 2); }, -w / 2, w / 2,
                            [w](double d) { return -M_PI / w * std::sin(2 * M_PI * d / w); }, {},
                            [w](double d) { return -2 * M_PI * M_PI / (w * w) * std::cos(2 * M_PI * d / w); });
}

}  // namespace

// The entries of resample_conv.hpp.
void add_resample_conv_entries(std::vector<OpInfo>& t) {
  using D = Domain;
  // f (batch..., N, B), coarse (N, A)
  for (bool sampled : {false, true}) {
    OpInfo op;
    op.name = sampled ? "resample_conv_sampled_points" : "resample_conv_cos2_uniform";
    op.signature = "resample_conv(Tensor,Tensor,FineGrid,Response,ResampleConvOptions)";
    op.torch = sampled ? std::string("lo = -0.12\nhi = 0.2\n") + kTorchSampled : std::string("w = 0.3\n") + kTorchCos2;
    op.sample = [sampled](Dtype dt, const SampleSpec& s, Generator& g) {
      const std::int64_t N = s.sizes[0], A = s.sizes[1], B = s.sizes[2];
      FineGrid grid;
      if (sampled) {  // sorted random points on [0, 1]
        std::vector<double> x(static_cast<std::size_t>(B));
        for (auto& v : x) v = g.uniform();
        std::sort(x.begin(), x.end());
        grid = FineGrid::points(Tensor::from_vector(x, {B}, kFloat64));
      } else {
        grid = FineGrid::uniform(0.0, 1.0 / static_cast<double>(std::max<std::int64_t>(B - 1, 1)), B);
      }
      Tensor coarse = values({N, A}, g, kFloat64, D::unit);
      coarse = (coarse * 1.2 - 0.1).detach();  // [-0.1, 1.1): supports reaching past both ends
      SampleInput si{{{"f", values(bshape(s.batch, {N, B}), g, dt)}, {"coarse", coarse.to(dt)}}, {}, {}};
      if (sampled) si.inputs.push_back({"v", values({6}, g, dt)});
      si.inputs.push_back({"x", grid.to_tensor(dt), false});
      si.call = [grid, sampled](const Tensors& in) {
        return resample_conv(in[0], in[1], grid, sampled ? Response::sampled(in[2], -0.12, 0.2) : cos2(0.3));
      };
      return si;
    };
    op.size_names = {"N", "A", "B"};
    op.small = {3, 5, 30};
    op.threads = {64, 600, 600};
    op.large = {300, 300, 3000};
    op.supports_batch = true;
    op.check_undefined = false;  // x (the grid's points) is for torch only; undefined f: errors below
    op.rtol32 = 1e-3;
    op.atol32 = 1e-4;
    if (!sampled)
      op.errors = {
          {"f and coarse with different N",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({4, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 10)", "(4, 2)"}},
          {"f of the wrong width",
           [] {
             resample_conv(Tensor::zeros({3, 9}, kFloat64), Tensor::zeros({3, 2}, kFloat64),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "(3, 9)"}},
          {"dtype mix",
           [] {
             resample_conv(Tensor::zeros({3, 10}, kFloat64), Tensor::zeros({3, 2}, kFloat32),
                           FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "dtype"}},
          {"undefined f",
           [] {
             resample_conv(Tensor(), Tensor::zeros({3, 2}, kFloat64), FineGrid::uniform(0, 0.1, 10), cos2(0.3));
           },
           {"resample_conv", "'f'"}}};
    t.push_back(op);
  }
}

const bool registered = register_entries(__FILE__, add_resample_conv_entries);

}  // namespace xgrad::test::table
