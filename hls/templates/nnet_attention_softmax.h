// The softmax of the attention core (nnet_attention_core.h, which includes this header), bit-exact
// to eatt.quant.golden.GoldenCore: table exp over the visible keys, one reciprocal per query and
// head, value weighting, normalization. The reciprocal and the normalization also serve the
// window unit (nnet_window_attention.h) and the folded layer (nnet_folded_attention.h).
//
//   z = max_j S - S >= 0 over the visible keys; e = EXP[z >> exp_shift] (0 past the table, 0 for
//   a hidden key); E = sum_j e;  N = sum_j e_j V_j;  n = leading one of E;
//   R = RECIP[K bits below the leading one];  O = clamp(round_half_up(N R / 2^(recip_frac + n)))
//
// CONFIG_T: the core's (attention_core_config, from which the generated config derives); the
// reciprocal and the normalization read only the types they list, which the window unit's has.

#ifndef NNET_ATTENTION_SOFTMAX_H_
#define NNET_ATTENTION_SOFTMAX_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_common.h"

namespace nnet {

// -- reciprocal of the exp sum and normalization (shared with nnet_window_attention.h) ------------
// Uses CONFIG_T's esum_t, esum_bits, norm_t, recip_t, recip_index_bits, recip_frac, numer_t,
// prod_t, v_t, v_min, v_max, recip_table_t.
template <typename CONFIG_T>
void attention_core_reciprocal(
    typename CONFIG_T::esum_t total,
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    typename CONFIG_T::recip_t &r, unsigned &shift) {
    #pragma HLS INLINE
    // leading-one detector: n = floor(log2 total) (total >= 2^exp_frac > 0)
    unsigned n = 0;
SmLead:
    for (unsigned b = 0; b < CONFIG_T::esum_bits; b++) {
        #pragma HLS UNROLL
        if (total[b]) n = b;
    }
    // the recip_index_bits bits below the leading one index the reciprocal table
    typename CONFIG_T::norm_t top = total;
    if (n >= CONFIG_T::recip_index_bits) {
        top = top >> (n - CONFIG_T::recip_index_bits);
    } else {
        top = top << (CONFIG_T::recip_index_bits - n);
    }
    unsigned ridx = top.to_uint() - (1u << CONFIG_T::recip_index_bits);
    r = recip_table[ridx];
    shift = CONFIG_T::recip_frac + n;
}

// O = clamp(round_half_up(N R / 2^shift)) into v_bits: (N R + 2^(shift-1)) >> shift, clamped
template <typename CONFIG_T>
typename CONFIG_T::v_t attention_core_normalize(typename CONFIG_T::numer_t acc,
                                                typename CONFIG_T::recip_t r, unsigned shift) {
    #pragma HLS INLINE
    typename CONFIG_T::prod_t half = 1;
    half = half << (shift - 1);
    typename CONFIG_T::prod_t p = acc * r;
    p = (p + half) >> shift;
    typename CONFIG_T::v_t o;
    if (p < CONFIG_T::v_min) {
        o = CONFIG_T::v_min;
    } else if (p > CONFIG_T::v_max) {
        o = CONFIG_T::v_max;
    } else {
        o = p;
    }
    return o;
}

// -- softmax by table lookup over the visible keys, one reciprocal per query, value weighting --
// visible[i][j]: key j gets weight in query i's softmax. The max runs over the visible keys only
// and a hidden key's weight is 0 (eatt.quant.golden.GoldenCore.softmax_weights). Key 0 is always
// visible (length >= 1, offset >= 0), so the max starts there and the sum is at least EXP[0]. An
// unmasked core passes every key visible (a constant the compiler folds away).
template <typename CONFIG_T>
void attention_core_softmax_visible(
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k],
    typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim],
    const bool visible[CONFIG_T::len_q][CONFIG_T::len_k],
    const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE
SmHead:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
    SmQuery:
        for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
            #pragma HLS UNROLL
            // max subtraction over the visible keys (key 0 always is)
            typename CONFIG_T::score_t m = scores[h][i][0];
        SmMax:
            for (unsigned j = 1; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                if (visible[i][j] && scores[h][i][j] > m) m = scores[h][i][j];
            }
            // exp table at (max - S) >> exp_shift for a visible key, 0 past the table; a hidden
            // key's weight is 0; sum
            typename CONFIG_T::exp_t e[CONFIG_T::len_k];
            #pragma HLS ARRAY_PARTITION variable=e complete
            typename CONFIG_T::esum_t total = 0;
        SmExp:
            for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                e[j] = 0;
                if (visible[i][j]) {
                    typename CONFIG_T::zidx_t z = m - scores[h][i][j];
                    typename CONFIG_T::zidx_t idx = z >> CONFIG_T::exp_shift;
                    if (idx < CONFIG_T::exp_table_size) e[j] = exp_table[idx];
                }
                total += e[j];
            }
            typename CONFIG_T::recip_t r;
            unsigned shift;
            attention_core_reciprocal<CONFIG_T>(total, recip_table, r, shift);
        SmCol:
            for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
                #pragma HLS UNROLL
                unsigned col = h * CONFIG_T::d_head + d;
                typename CONFIG_T::numer_t acc = 0;
            SmNum:
                for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                    #pragma HLS UNROLL
                    acc += e[j] * v[j][col];
                }
                attn[i][col] = attention_core_normalize<CONFIG_T>(acc, r, shift);
            }
        }
    }
}


// -- the softmax of a core: key j is visible to query i when j < length (CONFIG_T::key_padding)
// and j <= i + offset (CONFIG_T::causal); a core without masks (both false: attention_core_config)
// passes len_k, len_k - 1 and every key is visible (constants the compiler folds away) ---------
template <typename CONFIG_T>
void attention_core_softmax_values_masked(
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k],
    typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim], unsigned length, unsigned offset,
    const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE
    bool visible[CONFIG_T::len_q][CONFIG_T::len_k];
    #pragma HLS ARRAY_PARTITION variable=visible complete dim=0
SmVisQuery:
    for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
        #pragma HLS UNROLL
    SmVisKey:
        for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
            #pragma HLS UNROLL
            bool vis = true;
            if (CONFIG_T::key_padding && !(j < length)) vis = false;
            if (CONFIG_T::causal && j > i + offset) vis = false;
            visible[i][j] = vis;
        }
    }
    attention_core_softmax_visible<CONFIG_T>(scores, v, visible, exp_table, recip_table, attn);
}

} // namespace nnet

#endif
