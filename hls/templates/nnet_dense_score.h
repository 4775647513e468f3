// The Dense Synthesizer's alignment (Tay et al., ICML 2021, Eq. 2), bit-exact to
// eatt.mechanisms.dense: each query row predicts its scores over the key positions,
//
//   H = max(0, (X W_1) >> q_shift)        the hidden layer, requantized into qk_t, relu'd
//   S[h][i][j] = sum_d H[i][d] W_2[d][h * len_k + j]
//
// W_1 (dim x dim) comes in the slot wq, W_2 (dim x heads * len_k) in wk, both row-major. No
// keys are read (y is unused); the softmax, values and W_O are the core's
// (nnet_attention_core.h).

#ifndef NNET_DENSE_SCORE_H_
#define NNET_DENSE_SCORE_H_

#include "nnet_attention_core.h"

namespace nnet {

template <typename CONFIG_T>
void dense_alignment(
    typename CONFIG_T::in_code_t x[CONFIG_T::len_q][CONFIG_T::dim],
    typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],
    const typename CONFIG_T::wq_t w1[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::wk_t w2[CONFIG_T::dim * CONFIG_T::heads * CONFIG_T::len_k],
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k]) {
    #pragma HLS INLINE
    typename CONFIG_T::qk_t hidden[CONFIG_T::len_q][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=hidden complete dim=0
    // H: the core's product projection, relu'd
    attention_multiply_project<CONFIG_T, CONFIG_T::len_q, CONFIG_T::q_shift,
                               typename CONFIG_T::qacc_t, true>(x, w1, hidden);
    const unsigned cols = CONFIG_T::heads * CONFIG_T::len_k;
DenseHead:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
    DenseQuery:
        for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
            #pragma HLS UNROLL
        DenseKey:
            for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                typename CONFIG_T::score_t s = 0;
            DenseDim:
                for (unsigned d = 0; d < CONFIG_T::dim; d++) {
                    #pragma HLS UNROLL
                    s += hidden[i][d] * w2[d * cols + h * CONFIG_T::len_k + j];
                }
                scores[h][i][j] = s;
            }
        }
    }
}

NNET_ATTENTION_SCORE(dense_score, dense_alignment, synthesized_mechanism)

} // namespace nnet

#endif
