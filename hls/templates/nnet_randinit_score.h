// The Random Synthesizer's alignment, "RandInit" (Tay et al., ICML 2021), bit-exact to
// eatt.mechanisms.randinit: a learned score matrix per head, read, not computed,
//
//   S[h][i][j] = R[(h * len_q + i) * len_k + j]
//
// R comes in the slot wq (heads * len_q * len_k entries); the slot wk holds one unused entry.
// Neither X nor Y is read; the softmax, values and W_O are the core's (nnet_attention_core.h).

#ifndef NNET_RANDINIT_SCORE_H_
#define NNET_RANDINIT_SCORE_H_

#include "nnet_attention_core.h"

namespace nnet {

template <typename CONFIG_T>
void randinit_alignment(
    typename CONFIG_T::in_code_t x[CONFIG_T::len_q][CONFIG_T::dim],
    typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],
    const typename CONFIG_T::wq_t r[CONFIG_T::heads * CONFIG_T::len_q * CONFIG_T::len_k],
    const typename CONFIG_T::wk_t unused[1],
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k]) {
    #pragma HLS INLINE
RandInitHead:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
    RandInitQuery:
        for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
            #pragma HLS UNROLL
        RandInitKey:
            for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                scores[h][i][j] = r[(h * CONFIG_T::len_q + i) * CONFIG_T::len_k + j];
            }
        }
    }
}

NNET_ATTENTION_SCORE(randinit_score, randinit_alignment, synthesized_mechanism)

} // namespace nnet

#endif
