// CPU oracle for problem 61: every Gaussian of every rank projected into every camera in double
// precision, PKB's fully_fused_projection formulas; rank r's rows are the visible pairs with its
// cameras, in the order (source rank, local camera, Gaussian), then -1 padding.
#include <algorithm>
#include <array>
#include <cmath>

#include "spec/oracle.hpp"

namespace {

using Mat3 = std::array<std::array<double, 3>, 3>;

/// One Gaussian seen by one camera: what a packed row holds (before the ids).
struct Projection {
  bool visible = false;
  double radius[2] = {0, 0};
  double means2d[2] = {0, 0};
  double depth = 0;
  double conic[3] = {0, 0, 0};
};

struct Setup {
  double width, height, eps2d, near_plane, far_plane;
};

/// World covariance R diag(s)^2 R^T of Gaussian i (quats, scales rows i).
Mat3 covariance(const std::vector<double>& quats, const std::vector<double>& scales, long long i) {
  double q[4], n = 0;
  for (int k = 0; k < 4; ++k) n += quats[4 * i + k] * quats[4 * i + k];
  n = std::max(std::sqrt(n), 1e-12);  // F.normalize's eps
  for (int k = 0; k < 4; ++k) q[k] = quats[4 * i + k] / n;
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  const Mat3 R = {{{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
                   {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
                   {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}}};
  Mat3 S{};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      for (int j = 0; j < 3; ++j) S[a][b] += R[a][j] * scales[3 * i + j] * R[b][j] * scales[3 * i + j];
  return S;
}

/// Gaussian (mean m, covariance S) in the camera with view matrix V (16 values) and intrinsics K (9).
Projection project(const double* m, const Mat3& S, const double* V, const double* K, const Setup& p) {
  double mc[3];
  for (int a = 0; a < 3; ++a) mc[a] = V[4 * a] * m[0] + V[4 * a + 1] * m[1] + V[4 * a + 2] * m[2] + V[4 * a + 3];
  Mat3 Sc{};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) Sc[a][b] += V[4 * a + j] * S[j][k] * V[4 * b + k];
  const double tx = mc[0], ty = mc[1], tz = mc[2];
  const double fx = K[0], fy = K[4], cx = K[2], cy = K[5];
  const double tan_x = 0.5 * p.width / fx, tan_y = 0.5 * p.height / fy;
  const double lim_xp = (p.width - cx) / fx + 0.3 * tan_x, lim_xn = cx / fx + 0.3 * tan_x;
  const double lim_yp = (p.height - cy) / fy + 0.3 * tan_y, lim_yn = cy / fy + 0.3 * tan_y;
  const double txc = tz * std::clamp(tx / tz, -lim_xn, lim_xp);
  const double tyc = tz * std::clamp(ty / tz, -lim_yn, lim_yp);
  const double J[2][3] = {{fx / tz, 0, -fx * txc / (tz * tz)}, {0, fy / tz, -fy * tyc / (tz * tz)}};
  double c[2][2] = {{0, 0}, {0, 0}};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) c[a][b] += J[a][j] * Sc[j][k] * J[b][k];
  Projection out;
  for (int a = 0; a < 2; ++a) out.means2d[a] = (K[3 * a] * mc[0] + K[3 * a + 1] * mc[1] + K[3 * a + 2] * mc[2]) / tz;
  c[0][0] += p.eps2d;
  c[1][1] += p.eps2d;
  const double det = std::max(c[0][0] * c[1][1] - c[0][1] * c[1][0], 1e-10);
  out.conic[0] = c[1][1] / det;
  out.conic[1] = -(c[0][1] + c[1][0]) / 2.0 / det;
  out.conic[2] = c[0][0] / det;
  out.depth = tz;
  double r[2] = {std::ceil(3.33 * std::sqrt(c[0][0])), std::ceil(3.33 * std::sqrt(c[1][1]))};
  if (!(tz > p.near_plane && tz < p.far_plane)) r[0] = r[1] = 0;
  const bool inside = out.means2d[0] + r[0] > 0 && out.means2d[0] - r[0] < p.width && out.means2d[1] + r[1] > 0 &&
                      out.means2d[1] - r[1] < p.height;
  if (!inside) r[0] = r[1] = 0;
  out.radius[0] = r[0];
  out.radius[1] = r[1];
  out.visible = r[0] > 0 && r[1] > 0;
  return out;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const long long N = io.param("N"), C = io.param("C");
  const Setup p{io.fparam("width"), io.fparam("height"), io.fparam("eps2d"), io.fparam("near_plane"),
                io.fparam("far_plane")};
  enum { kMeans, kQuats, kScales, kOpac, kColors, kView, kK };
  // Every rank's covariances, once.
  std::vector<std::vector<Mat3>> cov(W);
  for (int s = 0; s < W; ++s)
    for (long long i = 0; i < N; ++i) cov[s].push_back(covariance(io.inputs[s][kQuats].values, io.inputs[s][kScales].values, i));
  for (int r = 0; r < W; ++r) {
    auto& out = io.outputs[r];
    for (auto& o : out) std::fill(o.values.begin(), o.values.end(), -1.0);
    long long row = 0;
    for (int s = 0; s < W; ++s)
      for (long long c = 0; c < C; ++c)
        for (long long i = 0; i < N; ++i) {
          const Projection pr = project(&io.inputs[s][kMeans].values[3 * i], cov[s][i], &io.inputs[r][kView].values[16 * c],
                                        &io.inputs[r][kK].values[9 * c], p);
          if (!pr.visible) continue;
          out[0].values.at(row) = static_cast<double>(c);
          out[1].values[row] = static_cast<double>(i + r * N);  // PKB: the receiving rank's offset
          for (int a = 0; a < 2; ++a) out[2].values[2 * row + a] = pr.radius[a];
          for (int a = 0; a < 2; ++a) out[3].values[2 * row + a] = pr.means2d[a];
          out[4].values[row] = pr.depth;
          for (int a = 0; a < 3; ++a) out[5].values[3 * row + a] = pr.conic[a];
          out[6].values[row] = io.inputs[s][kOpac].values[i];
          for (int a = 0; a < 3; ++a) out[7].values[3 * row + a] = io.inputs[s][kColors].values[3 * i + a];
          ++row;
        }
  }
}
