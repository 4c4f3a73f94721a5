// CPU oracle for problem 64: each rank's two-hop sample, computed directly from the definition.
// A frontier node v is sampled on its owner o = node_to_rank[v]: the first min(k, deg) entries of
// o's CSC row v, with their positions as edge ids. Each hop's samples follow the frontier order;
// their nodes not yet in `node` are appended in order of first occurrence and form the next
// frontier. The exchange PKB runs (requests to the owners, replies back) changes no value, so the
// oracle reads the owner's graph in place.
#include <algorithm>
#include <unordered_map>

#include "spec/oracle.hpp"

namespace {

enum Input { kSeeds = 0, kRowPtr = 1, kCol = 2, kOwner = 3 };
enum Output { kOutNode = 0, kOutRow = 1, kOutCol = 2, kOutEdge = 3, kOutSizes = 4 };

struct Sampled {
  long long nbr, dst, edge;
};

}  // namespace

PKB_ORACLE(io) {
  const long long W = io.world, S = io.param("S");
  const long long fanouts[2] = {io.param("F1"), io.param("F2")};
  const std::vector<double>& owner = io.inputs[0][kOwner].values;  // shared: the same on every rank
  for (long long r = 0; r < W; ++r) {
    std::vector<long long> node;
    std::unordered_map<long long, long long> index;  // node id -> its index in node
    for (long long i = 0; i < S; ++i) {
      const long long v = static_cast<long long>(io.inputs[r][kSeeds].values[i]);
      index.emplace(v, static_cast<long long>(node.size()));  // seeds are distinct (permutation draw)
      node.push_back(v);
    }
    std::vector<long long> frontier = node;
    std::vector<Sampled> edges;
    for (long long k : fanouts) {
      std::vector<long long> next;
      for (long long v : frontier) {
        const long long o = static_cast<long long>(owner[v]);
        const std::vector<double>& ptr = io.inputs[o][kRowPtr].values;
        const std::vector<double>& col = io.inputs[o][kCol].values;
        const long long start = static_cast<long long>(ptr[v]), deg = static_cast<long long>(ptr[v + 1]) - start;
        for (long long j = 0; j < std::min(k, deg); ++j) {
          const long long u = static_cast<long long>(col[start + j]);
          edges.push_back({u, v, start + j});
          if (index.emplace(u, static_cast<long long>(node.size())).second) {
            node.push_back(u);
            next.push_back(u);
          }
        }
      }
      frontier = std::move(next);
    }
    std::vector<std::vector<double>*> out;
    for (auto& t : io.outputs[r]) out.push_back(&t.values);
    for (auto* o : out) std::fill(o->begin(), o->end(), -1.0);
    for (size_t i = 0; i < node.size(); ++i) out[kOutNode]->at(i) = static_cast<double>(node[i]);
    for (size_t e = 0; e < edges.size(); ++e) {
      out[kOutRow]->at(e) = static_cast<double>(index.at(edges[e].nbr));
      out[kOutCol]->at(e) = static_cast<double>(index.at(edges[e].dst));
      out[kOutEdge]->at(e) = static_cast<double>(edges[e].edge);
    }
    (*out[kOutSizes])[0] = static_cast<double>(node.size());
    (*out[kOutSizes])[1] = static_cast<double>(edges.size());
  }
}
