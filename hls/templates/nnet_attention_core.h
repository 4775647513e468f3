// One attention core (E-ATT or dot product), bit-exact to eatt.quant.golden.GoldenCore.
//
// hls4ml nnet_utils style: templated on the input/output types and a CONFIG_T struct of static
// constants and integer typedefs (written by eatt.hls from the QONNX AttentionCore node; every
// width is derived from the golden model's bounds, docs/golden.md, so no adder can overflow).
//
//   codes:   X, Y real values on the <in_bits, in_frac> grid -> integer codes (their raw bits)
//   E-ATT:   Xb = X > tau_int; Q = (rows of W_Q selected by Xb, added) >> q_shift     [no *]
//            S[h][i][j] = -sum_d |Q[i][d] - K[j][d]|                                   [no *]
//   dot:     Q = (X W_Q) >> q_shift;  S[h][i][j] = sum_d Q[i][d] K[j][d]
//   V = (Y W_V) >> v_shift
//   softmax: z = max_j S - S >= 0; e = EXP[z >> exp_shift] (0 past the table); E = sum_j e
//            N = sum_j e_j V_j;  n = leading one of E;  R = RECIP[K bits below the leading one]
//            O = clamp(round_half_up(N R / 2^(recip_frac + n))) into v_bits
//   out:     Z = (O W_O) >> out_shift, written as a real value with out_frac fraction bits
//   masks:   (attention_core_masked, a core with key_padding / causal) key j is
//            visible to query i when j < length (key_padding) and j <= i + offset (causal);
//            the max runs over the visible keys, a hidden key's e is 0; widths unchanged
//
// The score function is the layer's mechanism (eatt.mechanisms): CONFIG_T::score<CONFIG_T> is
// l1_score (E-ATT) or dot_score (vanilla) here, dense_score or randinit_score in their own
// headers, written into the config by eatt.hls.handlers the way hls4ml's dense_config picks its
// kernel; its alignment() runs the mechanism's alignment (l1_alignment, dot_alignment, ...).
// The E-ATT alignment (l1_alignment and what it calls: attention_binarize,
// attention_select_project, attention_l1_accumulate) holds no multiplication (tests/test_hls.py
// scans them); index arithmetic there uses running counters. The projections here also serve
// the dense and window headers; the softmax (exp, E, reciprocal, N, O) is in
// nnet_attention_softmax.h, included here.
//
// Pragmas: the layer functions (attention_core, attention_core_masked: one inlined body) are
// pipelined with II = CONFIG_T::reuse_factor (the ReuseFactor of the layer's hls4ml config);
// loops inside are unrolled, intermediate arrays completely partitioned. The tool shares
// operators to meet the II; there is no explicit resource limit.

#ifndef NNET_ATTENTION_CORE_H_
#define NNET_ATTENTION_CORE_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_attention_softmax.h"
#include "nnet_common.h"

namespace nnet {

struct attention_core_config {
    // dimensions
    static const unsigned len_q = 8;
    static const unsigned len_k = 8;
    static const unsigned dim = 16;
    static const unsigned heads = 2;
    static const unsigned d_head = 8;
    // formats and shifts (docs/golden.md)
    static const int tau_int = 16;
    static const unsigned q_shift = 0;
    static const unsigned v_shift = 0;
    static const unsigned exp_shift = 0;
    static const unsigned exp_table_size = 256;
    static const unsigned recip_index_bits = 8;
    static const unsigned recip_frac = 12;
    static const unsigned out_shift = 0;
    static const int v_min = -2048;
    static const int v_max = 2047;
    static const unsigned esum_bits = 14;
    static const unsigned reuse_factor = 1;
    // masks (only a masked core's config sets them; the *_masked layers read them)
    static const bool key_padding = false;  // the length input hides keys j >= length
    static const bool causal = false;       // the offset input hides keys j > i + offset
    // integer types (widths from the golden model's bounds), set by the generated config:
    // in_fixed_t, in_code_t, qacc_t, qk_t, diff_t, score_t, zidx_t, vacc_t, v_t, exp_t, esum_t,
    // norm_t, recip_t, numer_t, prod_t, oacc_t, out_code_t, out_fixed_t, and the weight/table
    // types wq_t, wk_t, wv_t, wo_t, exp_table_t, recip_table_t; a masked core also length_t
    // (ap_uint wide enough for len_k) and offset_t (for len_k - 1).
};

// The weight and table arguments of every attention layer, after its data ports (hls4ml's
// weights as the layer's arrays): W_Q, W_K (the mechanism's slots: n_wq, n_wk entries), W_V, W_O,
// the exp and reciprocal tables.
#define NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)                                                       \
    const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],                                              \
        const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk],                                          \
        const typename CONFIG_T::wv_t wv[CONFIG_T::dim * CONFIG_T::dim],                           \
        const typename CONFIG_T::wo_t wo[CONFIG_T::dim * CONFIG_T::dim],                           \
        const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],                  \
        const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits]

// -- inputs and outputs ---------------------------------------------------------------------------
template <class data_T, typename CONFIG_T, unsigned N_ROWS>
void attention_core_codes(data_T data[N_ROWS * CONFIG_T::dim],
                          typename CONFIG_T::in_code_t codes[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE
CodeRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
        #pragma HLS UNROLL
    CodeCol:
        for (unsigned d = 0; d < CONFIG_T::dim; d++) {
            #pragma HLS UNROLL
            // exact: data_T is the core's input grid (the Quant node's format)
            typename CONFIG_T::in_fixed_t real = data[i * CONFIG_T::dim + d];
            codes[i][d].range() = real.range();
        }
    }
}

// -- projections: Q, K (the alignments), V, O, Dense's hidden layer, the window unit's query ---
// Eq. 4 on the integer grid (strict: an input equal to tau gives 0)
template <typename CONFIG_T, unsigned N_ROWS>
void attention_binarize(typename CONFIG_T::in_code_t x[N_ROWS][CONFIG_T::dim],
                        ap_uint<1> xb[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE
BinRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
        #pragma HLS UNROLL
    BinCol:
        for (unsigned d = 0; d < CONFIG_T::dim; d++) {
            #pragma HLS UNROLL
            xb[i][d] = x[i][d] > CONFIG_T::tau_int;
        }
    }
}

// E-ATT: out = (Xb W) >> q_shift, each set bit selects a row of W, which is added (Eq. 6-9).
// Additions only: the weight index is a running counter.
template <typename CONFIG_T, unsigned N_ROWS, class w_T>
void attention_select_project(ap_uint<1> xb[N_ROWS][CONFIG_T::dim],
                              const w_T w[CONFIG_T::dim * CONFIG_T::dim],
                              typename CONFIG_T::qk_t out[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE
SelRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
        #pragma HLS UNROLL
    SelCol:
        for (unsigned c = 0; c < CONFIG_T::dim; c++) {
            #pragma HLS UNROLL
            typename CONFIG_T::qacc_t acc = 0;
            unsigned f = c;
        SelSum:
            for (unsigned r = 0; r < CONFIG_T::dim; r++) {
                #pragma HLS UNROLL
                if (xb[i][r]) acc += w[f];
                f += CONFIG_T::dim;
            }
            out[i][c] = acc >> CONFIG_T::q_shift;
        }
    }
}

// products: out = (A W) >> SHIFT, summed in acc_T; RELU: max(., 0) after the shift (Dense's
// hidden layer: the requantization is a floor, so the same either way)
template <typename CONFIG_T, unsigned N_ROWS, unsigned SHIFT, class acc_T, bool RELU = false,
          class a_T, class w_T, class out_T>
void attention_multiply_project(a_T a[N_ROWS][CONFIG_T::dim],
                                const w_T w[CONFIG_T::dim * CONFIG_T::dim],
                                out_T out[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE
MulRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
        #pragma HLS UNROLL
    MulCol:
        for (unsigned c = 0; c < CONFIG_T::dim; c++) {
            #pragma HLS UNROLL
            acc_T acc = 0;
        MulSum:
            for (unsigned r = 0; r < CONFIG_T::dim; r++) {
                #pragma HLS UNROLL
                acc += a[i][r] * w[r * CONFIG_T::dim + c];
            }
            acc_T shifted = acc >> SHIFT;
            out[i][c] = (RELU && shifted < 0) ? acc_T(0) : shifted;
        }
    }
}

// -- one step of the L1 distance (Eq. 10): acc -= |a - b|; subtract, absolute value, accumulate.
// Additions only (also the window unit's and the folded layer's score).
template <typename CONFIG_T>
void attention_l1_accumulate(typename CONFIG_T::score_t &acc, typename CONFIG_T::qk_t a,
                             typename CONFIG_T::qk_t b) {
    #pragma HLS INLINE
    typename CONFIG_T::diff_t t = a - b;
    if (t < 0) {
        acc += t;
    } else {
        acc -= t;
    }
}

// -- E-ATT alignment: binarize, select-and-add, shift, L1 distance. Additions only. ---------------
template <typename CONFIG_T>
void l1_alignment(
    typename CONFIG_T::in_code_t x[CONFIG_T::len_q][CONFIG_T::dim],
    typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],
    const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::wk_t wk[CONFIG_T::dim * CONFIG_T::dim],
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k]) {
    #pragma HLS INLINE
    ap_uint<1> xb[CONFIG_T::len_q][CONFIG_T::dim];
    ap_uint<1> yb[CONFIG_T::len_k][CONFIG_T::dim];
    typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim];
    typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=xb complete dim=0
    #pragma HLS ARRAY_PARTITION variable=yb complete dim=0
    #pragma HLS ARRAY_PARTITION variable=q complete dim=0
    #pragma HLS ARRAY_PARTITION variable=k complete dim=0
    // Q = Xb W_Q, K = Yb W_K: rows selected by the bits and added
    attention_binarize<CONFIG_T, CONFIG_T::len_q>(x, xb);
    attention_binarize<CONFIG_T, CONFIG_T::len_k>(y, yb);
    attention_select_project<CONFIG_T, CONFIG_T::len_q>(xb, wq, q);
    attention_select_project<CONFIG_T, CONFIG_T::len_k>(yb, wk, k);

    // S = -sum_d |Q_i - K_j| per head (Eq. 10): subtract, absolute value, accumulate
    unsigned base = 0;
L1Head:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
    L1Query:
        for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
            #pragma HLS UNROLL
        L1Key:
            for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                typename CONFIG_T::score_t s = 0;
                unsigned col = base;
            L1Dim:
                for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
                    #pragma HLS UNROLL
                    attention_l1_accumulate<CONFIG_T>(s, q[i][col], k[j][col]);
                    col++;
                }
                scores[h][i][j] = s;
            }
        }
        base += CONFIG_T::d_head;
    }
}

// -- dot-product alignment (for comparison): products ----------------------------------------------
template <typename CONFIG_T>
void dot_alignment(
    typename CONFIG_T::in_code_t x[CONFIG_T::len_q][CONFIG_T::dim],
    typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],
    const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::wk_t wk[CONFIG_T::dim * CONFIG_T::dim],
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k]) {
    #pragma HLS INLINE
    typedef typename CONFIG_T::qacc_t acc_t;
    typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim];
    typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=q complete dim=0
    #pragma HLS ARRAY_PARTITION variable=k complete dim=0
    attention_multiply_project<CONFIG_T, CONFIG_T::len_q, CONFIG_T::q_shift, acc_t>(x, wq, q);
    attention_multiply_project<CONFIG_T, CONFIG_T::len_k, CONFIG_T::q_shift, acc_t>(y, wk, k);
DotHead:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
    DotQuery:
        for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
            #pragma HLS UNROLL
        DotKey:
            for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
                #pragma HLS UNROLL
                typename CONFIG_T::score_t s = 0;
            DotDim:
                for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
                    #pragma HLS UNROLL
                    unsigned col = h * CONFIG_T::d_head + d;
                    s += q[i][col] * k[j][col];
                }
                scores[h][i][j] = s;
            }
        }
    }
}

// -- the score kernels a config picks (CONFIG_T::score; eatt.mechanisms' hls_score) -------------
// What a unit without the core's types asks of a mechanism (the window unit's CONFIG_T::mechanism):
// l1, the mechanism binarizes its Q/K inputs and scores by L1 distance; false: products. (The
// folded layer asks its own form, CONFIG_T::folded: nnet_folded_attention.h.)
struct l1_mechanism {
    static const bool l1 = true;
};
struct dot_mechanism {
    static const bool l1 = false;
};
// A mechanism kept in a header of its own (nnet_dense_score.h, nnet_randinit_score.h) declares
// its score type with the same macro: its alignment weights come in the slots wq (CONFIG_T::n_wq
// entries) and wk (n_wk).
struct synthesized_mechanism {
    static const bool l1 = false;
};
#define NNET_ATTENTION_SCORE(NAME, ALIGNMENT, MECHANISM)                                           \
    template <typename CONFIG_T> struct NAME : MECHANISM {                                         \
        static void alignment(typename CONFIG_T::in_code_t x[CONFIG_T::len_q][CONFIG_T::dim],      \
                              typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],      \
                              const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],                    \
                              const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk],                    \
                              typename CONFIG_T::score_t                                           \
                                  scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k]) {     \
            _Pragma("HLS INLINE") ALIGNMENT<CONFIG_T>(x, y, wq, wk, scores);                       \
        }                                                                                          \
    };
NNET_ATTENTION_SCORE(l1_score, l1_alignment, l1_mechanism)
NNET_ATTENTION_SCORE(dot_score, dot_alignment, dot_mechanism)

// -- values: V = (Y W_V) >> v_shift ---------------------------------------------------------------
template <typename CONFIG_T>
void attention_core_values(typename CONFIG_T::in_code_t y[CONFIG_T::len_k][CONFIG_T::dim],
                           const typename CONFIG_T::wv_t wv[CONFIG_T::dim * CONFIG_T::dim],
                           typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim]) {
    #pragma HLS INLINE
    attention_multiply_project<CONFIG_T, CONFIG_T::len_k, CONFIG_T::v_shift,
                               typename CONFIG_T::vacc_t>(y, wv, v);
}

// -- output projection: Z = (O W_O) >> out_shift, written on the <out_bits, out_frac> grid --------
// one output code as a real value with out_frac fraction bits (its raw bits)
template <typename CONFIG_T>
typename CONFIG_T::out_fixed_t attention_core_out_real(typename CONFIG_T::out_code_t code) {
    #pragma HLS INLINE
    typename CONFIG_T::out_fixed_t real;
    real.range() = code.range();
    return real;
}

// the codes z of the len_q output tokens into res (io_parallel: this core and the folded one)
template <class res_T, typename CONFIG_T>
void attention_core_write(typename CONFIG_T::out_code_t z[CONFIG_T::len_q][CONFIG_T::dim],
                          res_T res[CONFIG_T::len_q * CONFIG_T::dim]) {
    #pragma HLS INLINE
OutRow:
    for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
    OutCol:
        for (unsigned c = 0; c < CONFIG_T::dim; c++) {
            #pragma HLS UNROLL
            res[i * CONFIG_T::dim + c] = attention_core_out_real<CONFIG_T>(z[i][c]);
        }
    }
}

template <class res_T, typename CONFIG_T>
void attention_core_output(typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim],
                           const typename CONFIG_T::wo_t wo[CONFIG_T::dim * CONFIG_T::dim],
                           res_T res[CONFIG_T::len_q * CONFIG_T::dim]) {
    #pragma HLS INLINE
    typename CONFIG_T::out_code_t z[CONFIG_T::len_q][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=z complete dim=0
    attention_multiply_project<CONFIG_T, CONFIG_T::len_q, CONFIG_T::out_shift,
                               typename CONFIG_T::oacc_t>(attn, wo, z);
    attention_core_write<res_T, CONFIG_T>(z, res);  // OutRow unrolls too: the layer is pipelined
}

// -- the layers -------------------------------------------------------------------------------------
// attention_core_front: the codes of X and Y, the scores of the config's mechanism, V
template <class x_T, class y_T, typename CONFIG_T>
void attention_core_front(x_T x[CONFIG_T::len_q * CONFIG_T::dim], y_T y[CONFIG_T::len_k * CONFIG_T::dim],
                          const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],
                          const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk],
                          const typename CONFIG_T::wv_t wv[CONFIG_T::dim * CONFIG_T::dim],
                          typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k],
                          typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim]) {
    #pragma HLS INLINE
    typename CONFIG_T::in_code_t xc[CONFIG_T::len_q][CONFIG_T::dim];
    typename CONFIG_T::in_code_t yc[CONFIG_T::len_k][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=xc complete dim=0
    #pragma HLS ARRAY_PARTITION variable=yc complete dim=0
    attention_core_codes<x_T, CONFIG_T, CONFIG_T::len_q>(x, xc);
    attention_core_codes<y_T, CONFIG_T, CONFIG_T::len_k>(y, yc);
    CONFIG_T::template score<CONFIG_T>::alignment(xc, yc, wq, wk, scores);
    attention_core_values<CONFIG_T>(yc, wv, v);
}

// attention_core_body: the front, the softmax over the visible keys, the output projection; both
// layers inline it. length in [1, len_k], offset in [0, len_k - 1] (the golden model's ranges; the
// QONNX inputs L, O), read only where CONFIG_T::key_padding / causal
template <class x_T, class y_T, class res_T, typename CONFIG_T>
void attention_core_body(
    x_T x[CONFIG_T::len_q * CONFIG_T::dim], y_T y[CONFIG_T::len_k * CONFIG_T::dim], unsigned length,
    unsigned offset, res_T res[CONFIG_T::len_q * CONFIG_T::dim],
    NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)) {
    #pragma HLS INLINE
    typename CONFIG_T::score_t scores[CONFIG_T::heads][CONFIG_T::len_q][CONFIG_T::len_k];
    typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim];
    typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim];
    #pragma HLS ARRAY_PARTITION variable=scores complete dim=0
    #pragma HLS ARRAY_PARTITION variable=v complete dim=0
    #pragma HLS ARRAY_PARTITION variable=attn complete dim=0
    attention_core_front<x_T, y_T, CONFIG_T>(x, y, wq, wk, wv, scores, v);
    attention_core_softmax_values_masked<CONFIG_T>(scores, v, length, offset, exp_table,
                                                   recip_table, attn);
    attention_core_output<res_T, CONFIG_T>(attn, wo, res);
}

// the layer of a core without masks: nothing hidden (its config's key_padding, causal are false)
template <class x_T, class y_T, class res_T, typename CONFIG_T>
void attention_core(x_T x[CONFIG_T::len_q * CONFIG_T::dim], y_T y[CONFIG_T::len_k * CONFIG_T::dim],
                    res_T res[CONFIG_T::len_q * CONFIG_T::dim],
                    NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)) {
    #pragma HLS PIPELINE II=CONFIG_T::reuse_factor
    attention_core_body<x_T, y_T, res_T, CONFIG_T>(x, y, CONFIG_T::len_k, CONFIG_T::len_k - 1, res,
                                                   wq, wk, wv, wo, exp_table, recip_table);
}

// the layer of a masked core (key_padding / causal): the length and offset of this call. An input
// the core does not take is passed as its "nothing hidden" value (len_k, len_k - 1) and ignored
// (CONFIG_T::key_padding / causal are compile-time constants).
template <class x_T, class y_T, class res_T, typename CONFIG_T>
void attention_core_masked(
    x_T x[CONFIG_T::len_q * CONFIG_T::dim], y_T y[CONFIG_T::len_k * CONFIG_T::dim],
    typename CONFIG_T::length_t length, typename CONFIG_T::offset_t offset,
    res_T res[CONFIG_T::len_q * CONFIG_T::dim],
    NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)) {
    #pragma HLS PIPELINE II=CONFIG_T::reuse_factor
    attention_core_body<x_T, y_T, res_T, CONFIG_T>(x, y, length, offset, res, wq, wk, wv, wo,
                                                   exp_table, recip_table);
}

} // namespace nnet

#endif
