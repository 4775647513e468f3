// The Synthesizer's folded forms (Tay et al., ICML 2021): the CONFIG_T::folded<CONFIG_T> of the
// folded layer (nnet_folded_attention.h) for Dense and RandInit, bit-exact to
// eatt.mechanisms.dense and eatt.mechanisms.randinit. Their scores take no keys and no
// 1/sqrt(d) scale (the exp table holds it); everything after the scores is the layer's own.
//
//   Dense     the multiply walk does V, then the hidden layer H = max(0, (X W_1) >> q_shift)
//             (W_1 in the slot wq, S x S tiles; H in the query memory); per query and head the
//             score phase walks KB key blocks x DC feature chunks (the whole token, not a
//             head's HC): lane l adds S hidden codes times S entries of W_2's column
//             h len_k + jb P + l (W_2 in the slot wk, S x P tiles: one word a cycle)
//   RandInit  the multiply walk does V only; the score phase reads R (the slot wq, row-major,
//             P entries a word), one cycle a key block
//
// The RTL engine's (rtl_sim/rtl/folded_attention.sv) Dense and RandInit are built the same way.

#ifndef NNET_FOLDED_SYNTH_H_
#define NNET_FOLDED_SYNTH_H_

#include "nnet_folded_attention.h"

namespace nnet {

// Dense: S[h][i][j] = sum_d H[i][d] W_2[d][h len_k + j], DC cycles of S features a key block
template <typename CONFIG_T> struct folded_dense {
    static const bool select_walk = false, k_pass = false, q_pass = true, relu = true;
    static const unsigned chunks = CONFIG_T::dim / CONFIG_T::simd;
    NNET_FOLDED_SCORE_STEP(CONFIG_T) {
        #pragma HLS INLINE
        const unsigned P = CONFIG_T::lanes, S = CONFIG_T::simd;
        const unsigned KB = CONFIG_T::len_k / CONFIG_T::lanes;
        typename CONFIG_T::qk_t hs[S];
        typename CONFIG_T::wk_t ws[P][S];
        #pragma HLS ARRAY_PARTITION variable=hs complete
        #pragma HLS ARRAY_PARTITION variable=ws complete dim=0
        // W_2's tile (row chunk c, column chunk h KB + jb), as weight_tiles(W_2, S, P) writes it
        unsigned word = ((h * KB + jb) * chunks + c) * CONFIG_T::wk_words;
        for (unsigned s = 0; s < S; s++) {
            hs[s] = q[i][c * S + s];
            for (unsigned l = 0; l < P; l++) ws[l][s] = wk[word + s * P + l];
        }
        folded_dot_lanes<CONFIG_T, typename CONFIG_T::wk_t>(hs, ws, acc);
    }
};

// RandInit: S[h][i][j] = R[h len_q + i][j], P entries of R's row a cycle
template <typename CONFIG_T> struct folded_randinit {
    static const bool select_walk = false, k_pass = false, q_pass = false, relu = false;
    static const unsigned chunks = 1;
    NNET_FOLDED_SCORE_STEP(CONFIG_T) {
        #pragma HLS INLINE
        const unsigned KB = CONFIG_T::len_k / CONFIG_T::lanes;
        unsigned word = ((h * CONFIG_T::len_q + i) * KB + jb) * CONFIG_T::wq_words;
        for (unsigned l = 0; l < CONFIG_T::lanes; l++) acc[l] += wq[word + l];
    }
};

} // namespace nnet

#endif
