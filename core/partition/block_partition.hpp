// Block partition of a sequence (Bárány and Grinberg, "Block partitions of sequences", 2015),
// the algorithm torchgpipe's `balance` uses (torchgpipe Section 3: "computes a partition whose
// pairwise resource discrepancy is small ... we used the algorithm from [2]").
//
// Splits a sequence of non-negative weights into k contiguous non-empty blocks such that every
// block's sum is within one maximal element of every other's — the theorem's guarantee — by the
// theorem's local moves: (1) take a maximal block B_p; (2) stop if M(P) <= m(P) + 1; (3) else
// take the minimal block B_q closest to p, and move into it the adjacent element of its
// neighbour B_h on the side of B_p; if p = h go to (1), else to (2).
//
// Where torchgpipe normalises weights to [0, 1] by (x - min) / (max - min), we divide by the
// maximum only: subtracting the minimum changes block sums by a multiple of block length, so
// equal weights would all become 0 and the algorithm would stop at its initial split (3, 3, 5 for
// 11 layers in 3 blocks). Dividing by the maximum keeps the theorem's guarantee on the real sums.
//
// Thread-safety: pure function.
#pragma once

#include <vector>

namespace pipetwin {

// Returns block sizes (the torchgpipe "balance"); requires 1 <= k <= weights.size().
std::vector<int> block_partition(const std::vector<double>& weights, int k);

}  // namespace pipetwin
