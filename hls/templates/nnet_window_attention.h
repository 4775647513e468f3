// The windowed cross-attention unit (one decoding step), bit-exact to
// eatt.quant.window.WindowGolden.forward (docs/window.md, docs/hls.md "Kind window").
//
// hls4ml nnet_utils style: templated on the port types and a CONFIG_T struct of static constants
// and integer typedefs written by eatt.hls from the QONNX WindowAttention node (every width from
// the golden model's bounds, so no adder overflows).
//
//   Q       = (rows of W_Q selected by x > tau_int, added) >> q_shift    E-ATT (Eq. 4, 6-9)
//           = (x W_Q) >> q_shift                                           dot
//   window  [lo, hi] = [max(p - w, 0), min(p + w, len - 1)]               (local-p Eq. 9)
//   pass 1, one memory row s per cycle (WinScore):
//           S'[h] = S[h](Q, K_s) - P[level][|s - p|]    S = -sum|Q - K_s| (Eq. 10) or Q . K_s
//           running max M[h] = max(M[h], S'[h])
//   pass 2, one row per cycle (WinExp):
//           e = c_s * EXP[(M - S') >> exp_shift] (0 past the table)  (L0Drop Algorithm 1)
//           E[h] += e;  N[h][d] += e V_s[d]
//   O = clamp(round_half_up(N RECIP[E] / 2^(recip_frac + n)))  (attention_core_reciprocal and
//       attention_core_normalize of nnet_attention_softmax.h, through nnet_attention_core.h,
//       shared with the core)
//
// Pipelining (docs/hls.md): both window loops carry `PIPELINE II=1` and a trip count of
// hi - lo + 1 <= window_rows, so the step takes cycles proportional to the window, not to len_k.
// II = 1 holds because the only loop-carried dependences are the running max (compare and
// select) and the sums E, N (one adder each per row): each closes in one cycle. The two passes
// are separate loops because pass 2 needs the final max M before its first exp lookup (the
// scheme of the RTL unit, rtl_sim/window.py); the logits of pass 1 are kept in a window_rows
// buffer. Reading K_s and V_s in one cycle needs the memory arrays reshaped by rows
// (eatt.hls.project writes `ARRAY_RESHAPE cyclic factor=dim` for K and V in the top function).

#ifndef NNET_WINDOW_ATTENTION_H_
#define NNET_WINDOW_ATTENTION_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_attention_core.h"
#include "nnet_common.h"

namespace nnet {

struct window_attention_config {
    // dimensions
    static const unsigned len_k = 16;
    static const unsigned dim = 8;
    static const unsigned heads = 2;
    static const unsigned d_head = 4;
    static const unsigned window_d = 2;
    static const unsigned window_rows = 5;
    static const unsigned penalty_levels = 1;
    static const unsigned g_level = 0;  // level used when there is no G input (gaussian, none)
    typedef l1_mechanism mechanism;  // l1_mechanism or dot_mechanism (nnet_attention_core.h)
    // formats and shifts (docs/golden.md, docs/window.md)
    static const int tau_int = 16;
    static const unsigned q_shift = 0;
    static const unsigned exp_shift = 0;
    static const unsigned exp_table_size = 256;
    static const unsigned recip_index_bits = 8;
    static const unsigned recip_frac = 12;
    static const int v_min = -2048;
    static const int v_max = 2047;
    static const unsigned esum_bits = 22;
    // integer types, set by the generated config: in_fixed_t, in_code_t, k_fixed_t, vc_fixed_t,
    // int_fixed_t, qacc_t, qk_t, vcode_t, diff_t, score_t, logit_t, zidx_t, exp_t, count_t, cexp_t,
    // esum_t, norm_t, recip_t, v_t, numer_t, prod_t, out_fixed_t, and wq_t, exp_table_t,
    // recip_table_t, penalty_table_t.
};

// -- Q projection of the query ---------------------------------------------------------------------
// E-ATT: the binarized query selects rows of W_Q, which are added (no multiplication); dot: the
// core's attention_multiply_project (nnet_attention_core.h), one row.
template <typename CONFIG_T>
void window_attention_eatt_query(typename CONFIG_T::in_code_t x[1][CONFIG_T::dim],
                                 const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
                                 typename CONFIG_T::qk_t q[CONFIG_T::dim]) {
    #pragma HLS INLINE
WinSelQCol:
    for (unsigned c = 0; c < CONFIG_T::dim; c++) {
        #pragma HLS UNROLL
        typename CONFIG_T::qacc_t acc = 0;
        unsigned w = c;
    WinSelQSum:
        for (unsigned r = 0; r < CONFIG_T::dim; r++) {
            #pragma HLS UNROLL
            if (x[0][r] > CONFIG_T::tau_int) acc += wq[w];
            w += CONFIG_T::dim;
        }
        q[c] = acc >> CONFIG_T::q_shift;
    }
}

// -- the code of memory entry (row, col) of K or V: the raw bits of its value on fixed_T's grid
// (exact: the memory's port type holds that grid) -----------------------------------------------
template <class fixed_T, typename CONFIG_T, class m_T, class code_T>
void window_attention_entry(m_T mem[CONFIG_T::len_k * CONFIG_T::dim], unsigned row, unsigned col,
                            code_T &code) {
    #pragma HLS INLINE
    fixed_T real = mem[row * CONFIG_T::dim + col];
    code.range() = real.range();
}

// -- score of one memory row for head h: -sum|Q - K| (E-ATT) or Q . K (dot) ------------------------
// CONFIG_T::mechanism::l1 is a compile-time constant: an E-ATT unit has no multiplier here
// (the dot branch is removed as dead code).
template <class k_T, typename CONFIG_T>
typename CONFIG_T::score_t window_attention_score(typename CONFIG_T::qk_t q[CONFIG_T::dim],
                                                  k_T k[CONFIG_T::len_k * CONFIG_T::dim],
                                                  unsigned row, unsigned h) {
    #pragma HLS INLINE
    typename CONFIG_T::score_t s = 0;
WinScoreDim:
    for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
        #pragma HLS UNROLL
        unsigned col = h * CONFIG_T::d_head + d;
        typename CONFIG_T::qk_t code;  // k_T holds the Q/K grid
        window_attention_entry<typename CONFIG_T::k_fixed_t, CONFIG_T>(k, row, col, code);
        if (CONFIG_T::mechanism::l1) {
            attention_l1_accumulate<CONFIG_T>(s, q[col], code);
        } else {
            s += q[col] * code;
        }
    }
    return s;
}

template <class int_T, typename CONFIG_T>
unsigned window_attention_int(int_T value) {
    #pragma HLS INLINE
    typename CONFIG_T::int_fixed_t real = value;  // an integer input: exact on this grid
    return real.to_uint();
}

// -- the unit -----------------------------------------------------------------------------------------
// focus (position flexible): F[h] = lo + min(round(sum_r e_r r / E), rows - 1) per head, the
// rounded mean row (Flexible Eq. 4, the next step's p) through the same reciprocal as O
// (eatt.quant.window.WindowGolden.focus); numer_t and prod_t hold its sum and product too.
template <class x_T, class p_T, class w_T, class k_T, class v_T, class c_T, class l_T, class res_T,
          class f_T, typename CONFIG_T>
void window_attention_step(
    x_T x[CONFIG_T::dim], p_T p_in[1], w_T w_in[1], k_T k[CONFIG_T::len_k * CONFIG_T::dim],
    v_T v[CONFIG_T::len_k * CONFIG_T::dim], c_T c[CONFIG_T::len_k], l_T l_in[1], unsigned level,
    res_T res[CONFIG_T::dim], f_T focus[CONFIG_T::heads],
    const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    const typename CONFIG_T::penalty_table_t
        penalty_table[CONFIG_T::penalty_levels * (CONFIG_T::window_d + 1)]) {
    #pragma HLS INLINE
    typename CONFIG_T::in_code_t xc[1][CONFIG_T::dim];
    typename CONFIG_T::qk_t q[1][CONFIG_T::dim];
    typename CONFIG_T::logit_t logits[CONFIG_T::window_rows][CONFIG_T::heads];
    typename CONFIG_T::logit_t top[CONFIG_T::heads];
    typename CONFIG_T::esum_t total[CONFIG_T::heads];
    typename CONFIG_T::numer_t numer[CONFIG_T::dim];
    typename CONFIG_T::numer_t fnum[CONFIG_T::heads];  // sum_r e_r r (focus)
    #pragma HLS ARRAY_PARTITION variable=fnum complete dim=0
    #pragma HLS ARRAY_PARTITION variable=xc complete dim=0
    #pragma HLS ARRAY_PARTITION variable=q complete dim=0
    #pragma HLS ARRAY_PARTITION variable=logits complete dim=2
    #pragma HLS ARRAY_PARTITION variable=top complete dim=0
    #pragma HLS ARRAY_PARTITION variable=total complete dim=0
    #pragma HLS ARRAY_PARTITION variable=numer complete dim=0

    attention_core_codes<x_T, CONFIG_T, 1>(x, xc);
    if (CONFIG_T::mechanism::l1) {
        window_attention_eatt_query<CONFIG_T>(xc, wq, q[0]);
    } else {
        typedef typename CONFIG_T::qacc_t qacc_t;
        attention_multiply_project<CONFIG_T, 1, CONFIG_T::q_shift, qacc_t>(xc, wq, q);
    }

    // window bounds: [max(p - w, 0), min(p + w, len - 1)]; the centre p < len is always inside
    const int p = window_attention_int<p_T, CONFIG_T>(p_in[0]);
    const int w = window_attention_int<w_T, CONFIG_T>(w_in[0]);
    const int len = window_attention_int<l_T, CONFIG_T>(l_in[0]);
    const int lo = p - w < 0 ? 0 : p - w;
    const int hi = p + w > len - 1 ? len - 1 : p + w;
    const unsigned rows = hi - lo + 1;
    const unsigned pbase = level * (CONFIG_T::window_d + 1);

    // pass 1: score one row per cycle, subtract the position term, keep the running max
WinScore:
    for (unsigned r = 0; r < rows; r++) {
        #pragma HLS LOOP_TRIPCOUNT min=1 max=CONFIG_T::window_rows
        #pragma HLS PIPELINE II=1
        const int s = lo + (int)r;
        const unsigned dist = s < p ? p - s : s - p;
        const typename CONFIG_T::penalty_table_t pen = penalty_table[pbase + dist];
    WinScoreHead:
        for (unsigned h = 0; h < CONFIG_T::heads; h++) {
            #pragma HLS UNROLL
            typename CONFIG_T::logit_t z = window_attention_score<k_T, CONFIG_T>(q[0], k, s, h);
            z -= pen;
            logits[r][h] = z;
            if (r == 0 || z > top[h]) top[h] = z;
        }
    }

    // pass 2: counted exp, sum and value accumulation, one row per cycle
WinClear:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
        total[h] = 0;
        fnum[h] = 0;
    }
WinClearN:
    for (unsigned d = 0; d < CONFIG_T::dim; d++) {
        #pragma HLS UNROLL
        numer[d] = 0;
    }
WinExp:
    for (unsigned r = 0; r < rows; r++) {
        #pragma HLS LOOP_TRIPCOUNT min=1 max=CONFIG_T::window_rows
        #pragma HLS PIPELINE II=1
        const unsigned s = lo + r;
        typename CONFIG_T::int_fixed_t creal = c[s];
        typename CONFIG_T::count_t count = creal.to_uint();
    WinExpHead:
        for (unsigned h = 0; h < CONFIG_T::heads; h++) {
            #pragma HLS UNROLL
            typename CONFIG_T::zidx_t z = top[h] - logits[r][h];
            typename CONFIG_T::zidx_t idx = z >> CONFIG_T::exp_shift;
            typename CONFIG_T::exp_t e = 0;
            if (idx < CONFIG_T::exp_table_size) e = exp_table[idx];
            typename CONFIG_T::cexp_t ce = e * count;  // L0Drop: the row stands for `count` rows
            total[h] += ce;
            if (CONFIG_T::focus) fnum[h] += ce * r;
        WinExpCol:
            for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
                #pragma HLS UNROLL
                unsigned col = h * CONFIG_T::d_head + d;
                typename CONFIG_T::vcode_t vcode;
                window_attention_entry<typename CONFIG_T::vc_fixed_t, CONFIG_T>(v, s, col, vcode);
                numer[col] += ce * vcode;
            }
        }
    }

    // reciprocal once per head, normalization, output on the <v_bits, value_frac> grid
WinOutHead:
    for (unsigned h = 0; h < CONFIG_T::heads; h++) {
        #pragma HLS UNROLL
        typename CONFIG_T::recip_t r;
        unsigned shift;
        attention_core_reciprocal<CONFIG_T>(total[h], recip_table, r, shift);
    WinOutCol:
        for (unsigned d = 0; d < CONFIG_T::d_head; d++) {
            #pragma HLS UNROLL
            unsigned col = h * CONFIG_T::d_head + d;
            typename CONFIG_T::v_t o = attention_core_normalize<CONFIG_T>(numer[col], r, shift);
            typename CONFIG_T::out_fixed_t real;
            real.range() = o.range();
            res[col] = real;
        }
        if (CONFIG_T::focus) {  // a compile-time constant: no focus logic without Flexible
            typename CONFIG_T::v_t offset = attention_core_normalize<CONFIG_T>(fnum[h], r, shift);
            const unsigned off = offset.to_uint() < rows ? offset.to_uint() : rows - 1;
            focus[h] = lo + off;
        }
    }
}

// -- the layers (gaussian / none: no G input; flexible: G selects the penalty table row) -----------
template <class x_T, class p_T, class w_T, class k_T, class v_T, class c_T, class l_T, class res_T,
          typename CONFIG_T>
void window_attention(
    x_T x[CONFIG_T::dim], p_T p[1], w_T w[1], k_T k[CONFIG_T::len_k * CONFIG_T::dim],
    v_T v[CONFIG_T::len_k * CONFIG_T::dim], c_T c[CONFIG_T::len_k], l_T l[1],
    res_T res[CONFIG_T::dim], const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    const typename CONFIG_T::penalty_table_t
        penalty_table[CONFIG_T::penalty_levels * (CONFIG_T::window_d + 1)]) {
    unsigned focus[CONFIG_T::heads];  // no focus output without Flexible's penalty
    window_attention_step<x_T, p_T, w_T, k_T, v_T, c_T, l_T, res_T, unsigned, CONFIG_T>(
        x, p, w, k, v, c, l, CONFIG_T::g_level, res, focus, wq, exp_table, recip_table,
        penalty_table);
}

template <class x_T, class p_T, class w_T, class k_T, class v_T, class c_T, class l_T, class g_T,
          class res_T, class f_T, typename CONFIG_T>
void window_attention_flexible(
    x_T x[CONFIG_T::dim], p_T p[1], w_T w[1], k_T k[CONFIG_T::len_k * CONFIG_T::dim],
    v_T v[CONFIG_T::len_k * CONFIG_T::dim], c_T c[CONFIG_T::len_k], l_T l[1], g_T g[1],
    res_T res[CONFIG_T::dim], f_T focus[CONFIG_T::heads],
    const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
    const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
    const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
    const typename CONFIG_T::penalty_table_t
        penalty_table[CONFIG_T::penalty_levels * (CONFIG_T::window_d + 1)]) {
    const unsigned level = window_attention_int<g_T, CONFIG_T>(g[0]);
    window_attention_step<x_T, p_T, w_T, k_T, v_T, c_T, l_T, res_T, f_T, CONFIG_T>(
        x, p, w, k, v, c, l, level, res, focus, wq, exp_table, recip_table, penalty_table);
}

} // namespace nnet

#endif
