// The folded attention core, bit-exact to eatt.quant.golden.GoldenCore: the function of
// nnet_attention_core.h computed by one small datapath over many cycles, the hls4ml layer of the
// folded engine (rtl_sim/rtl/folded_attention.sv, docs/folded.md), for the mechanisms whose
// folded form (CONFIG_T::folded<CONFIG_T>, below) exists: E-ATT (folded_l1), the dot product
// (folded_dot), and in nnet_folded_synth.h the Synthesizer's Dense and RandInit.
//
// Folding parameters (CONFIG_T, chosen by the layer's ReuseFactor, docs/hls.md "Folded"):
//   lanes  keys scored per cycle (divides len_k)              KB = len_k / lanes
//   simd   features consumed per cycle (divides d_head)       DC = dim / simd, HC = d_head / simd
//   pe     E-ATT: V and O columns per cycle (divides simd)    M = simd / pe (others: pe = simd)
// and constants the generated config derives from them: tiles = DC^2, pair_steps = M DC^2,
// select_words = S S, multiply_words = S PE (a tile's weights on each walk), wq_words and
// wk_words (a word of the slots wq, wk: S S for the walks' tiles, S P for Dense's W_2, P for R).
//
// Every loop that does work carries `PIPELINE II=1` and unrolls only the lanes / simd / pe
// loops inside it, so one iteration is one cycle of a datapath of fixed size, and a call takes
// (the trip counts, eatt.hls.folding.hls_iterations; the RTL engine's phases):
//   load        (len_q + len_k) DC              the codes of X and Y, S features a cycle
//   projections one multiply walk (S x S tiles), len_q DC^2 after attention (O), before it:
//               vanilla (2 len_k + len_q) DC^2 (K, V, Q), Dense (len_k + len_q) DC^2 (V and
//               the hidden layer), RandInit len_k DC^2 (V);
//               E-ATT: M len_k DC^2 + max(0, len_q - (M - 1) len_k) DC^2 before, M len_q DC^2
//               after: a select walk (S x S tiles, additions only) for K and Q beside a
//               multiply walk (S x PE tiles) for V, as the RTL's two walks
//   attention   len_q heads (KB SC + KB + HC KB)   scores, exp, numerators; the score chunks
//               SC: HC (a head's features of Q and K), DC (Dense: a hidden row against W_2),
//               1 (RandInit: R read)
// A C simulation counts the iterations (FOLDED_CYCLE, read by eatt_folded_iterations; not under
// __SYNTHESIS__), which the tests compare with the formula.
//
// The layer is a DATAFLOW region of processes (the RTL engine's units; docs/hls.md, "Folded"):
// the loads, the projections before attention (folded_project_pre), attention
// (folded_attend_all), the output projection (folded_project_post) and the output, each
// array between two of them written by one and read by the next, so that HLS makes them
// ping-pong buffers and a call's processes overlap the next call's: the layer's interval is
// its slowest process (hls_iterations "ii"), its latency their sum ("total"). Unlike the RTL,
// whose walks serve both projections, the output projection is a process of its own here.
// Everything after the scores (exp, E, numerators, O, Z) is the same for every mechanism.
//
// The headers: the projection walks (the select and multiply walks' tiles and steps,
// folded_multiply_project, E-ATT's folded_eatt_project) and the iteration count FOLDED_CYCLE are
// in nnet_folded_walks.h, included here; the score lanes, the query-key forms, attention, the
// processes and the io_parallel layer (folded_attention) here; the io_stream layer
// (folded_attention_stream) in nnet_folded_stream.h; the Synthesizer's forms in
// nnet_folded_synth.h.
//
// Weights come tile by tile, as the RTL's ROMs (eatt.rtl_sim.folded.weight_tiles): tile (row
// chunk rc, column chunk cc) at word cc DC + rc holds w[rc S + r][cc COLS + c] at field
// r COLS + c. `ARRAY_RESHAPE cyclic factor = S COLS` makes one word of each tile. Dense's W_2
// is in S x P tiles (a score cycle's), RandInit's R row-major, P entries a word.
//
// The E-ATT select walk (nnet_folded_walks.h) and score lanes (folded_l1_lanes) hold no
// multiplication (tests/test_hls_folded.py scans them).

#ifndef NNET_FOLDED_ATTENTION_H_
#define NNET_FOLDED_ATTENTION_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_attention_core.h"
#include "nnet_common.h"
#include "nnet_folded_walks.h"
#include "nnet_types.h"

namespace nnet {

// -- the score lanes: P keys, S features of one head each ------------------------------------
// E-ATT: acc[l] -= |q - k_l| (Eq. 10), subtract, absolute value, accumulate. Additions only.
template <typename CONFIG_T>
void folded_l1_lanes(const typename CONFIG_T::qk_t q[CONFIG_T::simd],
                     const typename CONFIG_T::qk_t k[CONFIG_T::lanes][CONFIG_T::simd],
                     typename CONFIG_T::score_t acc[CONFIG_T::lanes]) {
    #pragma HLS INLINE
L1Lane:
    for (unsigned l = 0; l < CONFIG_T::lanes; l++) {
        #pragma HLS UNROLL
    L1Feature:
        for (unsigned s = 0; s < CONFIG_T::simd; s++) {
            #pragma HLS UNROLL
            attention_l1_accumulate<CONFIG_T>(acc[l], q[s], k[l][s]);
        }
    }
}

// dot product: acc[l] += q . k_l (k: K's codes, or for Dense a column of W_2's weights)
template <typename CONFIG_T, class k_T = typename CONFIG_T::qk_t>
void folded_dot_lanes(const typename CONFIG_T::qk_t q[CONFIG_T::simd],
                      const k_T k[CONFIG_T::lanes][CONFIG_T::simd],
                      typename CONFIG_T::score_t acc[CONFIG_T::lanes]) {
    #pragma HLS INLINE
DotLane:
    for (unsigned l = 0; l < CONFIG_T::lanes; l++) {
        #pragma HLS UNROLL
    DotFeature:
        for (unsigned s = 0; s < CONFIG_T::simd; s++) {
            #pragma HLS UNROLL
            acc[l] += q[s] * k[l][s];
        }
    }
}

// -- load: the codes of X (len_q tokens) and Y (len_k tokens), S features a cycle ------------
// one load cycle: features c S .. c S + S - 1 of the token at src[base] (an input array, or a
// stream's beat at base 0)
template <typename CONFIG_T, class src_T>
void folded_load_chunk(const src_T &src, unsigned base, unsigned c,
                       typename CONFIG_T::in_code_t codes[CONFIG_T::dim]) {
    #pragma HLS INLINE
LoadFeature:
    for (unsigned s = 0; s < CONFIG_T::simd; s++) {
        #pragma HLS UNROLL
        unsigned d = c * CONFIG_T::simd + s;
        typename CONFIG_T::in_fixed_t real = src[base + d];
        codes[d].range() = real.range();  // exact: src holds the input grid
    }
}

template <class data_T, typename CONFIG_T, unsigned N_ROWS>
void folded_load(data_T data[N_ROWS * CONFIG_T::dim],
                 typename CONFIG_T::in_code_t codes[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE off
LoadRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
    LoadChunk:
        for (unsigned c = 0; c < CONFIG_T::dim / CONFIG_T::simd; c++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            folded_load_chunk<CONFIG_T>(data, i * CONFIG_T::dim, c, codes[i]);
        }
    }
}

// -- the mechanisms' folded forms -----------------------------------------------------------
// CONFIG_T::folded<CONFIG_T> (written by eatt.hls.handlers from the mechanism's hls_score, as
// CONFIG_T::score; eatt.hls.folding.FOLDED_FORMS says the same to Python) is a struct of
//   select_walk  E-ATT's two walks (folded_eatt_project) before attention; else one multiply
//                walk (the RTL's passes): k_pass K (len_k tokens of Y), V always, q_pass Q or
//                the hidden layer (len_q tokens of X), relu: max(0, .) after its requantization
//   chunks       the score phase's cycles per key block (SC)
//   score_step   one cycle of the P score lanes: chunk c of key block jb, query i, head h
// Every form's score_step has the signature NNET_FOLDED_SCORE_STEP (the layer passes the token
// memories q, k and the alignment weights wq, wk; a form reads what it needs; acc: the P lanes'
// sums).
#define NNET_FOLDED_SCORE_STEP(CONFIG_T)                                                           \
    static void score_step(unsigned i, unsigned h, unsigned jb, unsigned c,                        \
                           typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim],              \
                           typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim],              \
                           const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],                       \
                           const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk],                       \
                           typename CONFIG_T::score_t acc[CONFIG_T::lanes])
// The query-key mechanisms (E-ATT's L1 and the dot product): Q and K on the walks, the HC
// chunks of a head's features; the Synthesizer's forms are in nnet_folded_synth.h.
template <typename CONFIG_T, bool L1> struct folded_query_key {
    static const bool select_walk = L1, k_pass = true, q_pass = true, relu = false;
    static const unsigned chunks = CONFIG_T::d_head / CONFIG_T::simd;
    NNET_FOLDED_SCORE_STEP(CONFIG_T) {
        #pragma HLS INLINE
        const unsigned P = CONFIG_T::lanes, S = CONFIG_T::simd;
        typename CONFIG_T::qk_t qs[S];
        typename CONFIG_T::qk_t ks[P][S];
        #pragma HLS ARRAY_PARTITION variable=qs complete
        #pragma HLS ARRAY_PARTITION variable=ks complete dim=0
        unsigned col = h * CONFIG_T::d_head + c * S;
        for (unsigned s = 0; s < S; s++) {
            qs[s] = q[i][col + s];
            for (unsigned l = 0; l < P; l++) ks[l][s] = k[jb * P + l][col + s];
        }
        if (L1) {
            folded_l1_lanes<CONFIG_T>(qs, ks, acc);
        } else {
            folded_dot_lanes<CONFIG_T>(qs, ks, acc);
        }
    }
};
template <class C> using folded_l1 = folded_query_key<C, true>;
template <class C> using folded_dot = folded_query_key<C, false>;

// -- attention of one query and head: scores, exp, numerators ---------------------------------
// Scores: KB x SC cycles (P keys a cycle, the form's score_step), the running max over the
// visible keys; exp: KB cycles (P table lookups, the sum E); the reciprocal of E; numerators:
// HC x KB cycles (S features x P keys), S outputs normalized when the last key chunk is in.
template <typename CONFIG_T>
void folded_attend(unsigned i, unsigned h, typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim],
                   typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim],
                   typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim],
                   const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],
                   const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk], unsigned length,
                   unsigned offset,
                   const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
                   const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
                   typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE
    typedef typename CONFIG_T::template folded<CONFIG_T> form;
    const unsigned P = CONFIG_T::lanes, S = CONFIG_T::simd;
    const unsigned KB = CONFIG_T::len_k / CONFIG_T::lanes, HC = CONFIG_T::d_head / CONFIG_T::simd;
    typename CONFIG_T::score_t scores[CONFIG_T::len_k];
    typename CONFIG_T::exp_t e[CONFIG_T::len_k];
    bool visible[CONFIG_T::len_k];
    #pragma HLS ARRAY_PARTITION variable=scores cyclic factor=CONFIG_T::lanes
    #pragma HLS ARRAY_PARTITION variable=e cyclic factor=CONFIG_T::lanes
    #pragma HLS ARRAY_PARTITION variable=visible cyclic factor=CONFIG_T::lanes
    typename CONFIG_T::score_t sacc[P];
    #pragma HLS ARRAY_PARTITION variable=sacc complete
    typename CONFIG_T::score_t m = 0;
ScoreBlock:
    for (unsigned jb = 0; jb < KB; jb++) {
    ScoreChunk:
        for (unsigned c = 0; c < form::chunks; c++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            if (c == 0) {
                for (unsigned l = 0; l < P; l++) sacc[l] = 0;
            }
            form::score_step(i, h, jb, c, q, k, wq, wk, sacc);
            if (c == form::chunks - 1) {
                for (unsigned l = 0; l < P; l++) {
                    unsigned j = jb * P + l;
                    bool vis = true;  // key 0 always is (length >= 1, offset >= 0)
                    if (CONFIG_T::key_padding && !(j < length)) vis = false;
                    if (CONFIG_T::causal && j > i + offset) vis = false;
                    scores[j] = sacc[l];
                    visible[j] = vis;
                    if (j == 0 || (vis && sacc[l] > m)) m = sacc[l];
                }
            }
        }
    }
    typename CONFIG_T::esum_t total = 0;
ExpBlock:
    for (unsigned jb = 0; jb < KB; jb++) {
        #pragma HLS PIPELINE II=1
        FOLDED_CYCLE();
        for (unsigned l = 0; l < P; l++) {
            unsigned j = jb * P + l;
            typename CONFIG_T::exp_t w = 0;
            if (visible[j]) {
                typename CONFIG_T::zidx_t z = m - scores[j];
                typename CONFIG_T::zidx_t idx = z >> CONFIG_T::exp_shift;
                if (idx < CONFIG_T::exp_table_size) w = exp_table[idx];
            }
            e[j] = w;
            total += w;
        }
    }
    typename CONFIG_T::recip_t r;
    unsigned shift;
    attention_core_reciprocal<CONFIG_T>(total, recip_table, r, shift);
    typename CONFIG_T::numer_t nacc[S];
    #pragma HLS ARRAY_PARTITION variable=nacc complete
NumerChunk:
    for (unsigned c = 0; c < HC; c++) {
    NumerBlock:
        for (unsigned jb = 0; jb < KB; jb++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            unsigned col = h * CONFIG_T::d_head + c * S;
            if (jb == 0) {
                for (unsigned s = 0; s < S; s++) nacc[s] = 0;
            }
            for (unsigned s = 0; s < S; s++) {
                for (unsigned l = 0; l < P; l++) {
                    unsigned j = jb * P + l;
                    nacc[s] += e[j] * v[j][col + s];
                }
            }
            if (jb == KB - 1) {
                for (unsigned s = 0; s < S; s++) {
                    attn[i][col + s] = attention_core_normalize<CONFIG_T>(nacc[s], r, shift);
                }
            }
        }
    }
}

// -- the processes of the folded core (each a DATAFLOW process of the layer) --------------------
// before attention: E-ATT's two walks, or the one multiply walk's passes of the form
template <typename CONFIG_T>
void folded_project_pre(typename CONFIG_T::in_code_t xc[CONFIG_T::len_q][CONFIG_T::dim],
                        typename CONFIG_T::in_code_t yc[CONFIG_T::len_k][CONFIG_T::dim],
                        const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],
                        const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk],
                        const typename CONFIG_T::wv_t wv[CONFIG_T::dim * CONFIG_T::dim],
                        typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim],
                        typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim],
                        typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim]) {
    #pragma HLS INLINE off
    typedef typename CONFIG_T::template folded<CONFIG_T> form;
    if (form::select_walk) {
        folded_eatt_project<CONFIG_T>(xc, yc, wq, wk, wv, q, k, v);
    } else {  // one multiply walk: K, V, then Q (or the hidden layer)
        if (form::k_pass) {
            folded_multiply_project<CONFIG_T, CONFIG_T::len_k, CONFIG_T::simd, CONFIG_T::q_shift,
                                    typename CONFIG_T::in_code_t, typename CONFIG_T::wk_t,
                                    typename CONFIG_T::qacc_t>(yc, wk, k);
        }
        folded_multiply_project<CONFIG_T, CONFIG_T::len_k, CONFIG_T::simd, CONFIG_T::v_shift,
                                typename CONFIG_T::in_code_t, typename CONFIG_T::wv_t,
                                typename CONFIG_T::vacc_t>(yc, wv, v);
        if (form::q_pass) {
            folded_multiply_project<CONFIG_T, CONFIG_T::len_q, CONFIG_T::simd, CONFIG_T::q_shift,
                                    typename CONFIG_T::in_code_t, typename CONFIG_T::wq_t,
                                    typename CONFIG_T::qacc_t, form::relu>(xc, wq, q);
        }
    }
}

// attention: every query and head; length in [1, len_k], offset in [0, len_k - 1] (read only
// where CONFIG_T::key_padding / causal)
template <typename CONFIG_T>
void folded_attend_all(typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim],
                       typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim],
                       typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim],
                       const typename CONFIG_T::wq_t wq[CONFIG_T::n_wq],
                       const typename CONFIG_T::wk_t wk[CONFIG_T::n_wk], unsigned length,
                       unsigned offset,
                       const typename CONFIG_T::exp_table_t exp_table[CONFIG_T::exp_table_size],
                       const typename CONFIG_T::recip_table_t recip_table[1 << CONFIG_T::recip_index_bits],
                       typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE off
AttendQuery:
    for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
    AttendHead:
        for (unsigned h = 0; h < CONFIG_T::heads; h++) {
            folded_attend<CONFIG_T>(i, h, q, k, v, wq, wk, length, offset, exp_table, recip_table,
                                    attn);
        }
    }
}

// after attention: the output projection, PE columns a cycle (pe = simd but for E-ATT)
template <typename CONFIG_T>
void folded_project_post(typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim],
                         const typename CONFIG_T::wo_t wo[CONFIG_T::dim * CONFIG_T::dim],
                         typename CONFIG_T::out_code_t z[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE off
    folded_multiply_project<CONFIG_T, CONFIG_T::len_q, CONFIG_T::pe, CONFIG_T::out_shift,
                            typename CONFIG_T::v_t, typename CONFIG_T::wo_t,
                            typename CONFIG_T::oacc_t>(attn, wo, z);
}

// -- the folded core on token memories: projections, attention, output projection -------------
// xc: len_q x dim, yc: len_k x dim input codes; z: len_q x dim output codes. Inlined into the
// layer, whose DATAFLOW region its three processes join.
template <typename CONFIG_T>
void folded_attention_compute(
    typename CONFIG_T::in_code_t xc[CONFIG_T::len_q][CONFIG_T::dim],
    typename CONFIG_T::in_code_t yc[CONFIG_T::len_k][CONFIG_T::dim], unsigned length,
    unsigned offset, NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T),
    typename CONFIG_T::out_code_t z[CONFIG_T::len_q][CONFIG_T::dim]) {
    #pragma HLS INLINE
    const unsigned S = CONFIG_T::simd, P = CONFIG_T::lanes;
    #pragma HLS ARRAY_RESHAPE variable=wq cyclic factor=CONFIG_T::wq_words
    #pragma HLS ARRAY_RESHAPE variable=wk cyclic factor=CONFIG_T::wk_words
    #pragma HLS ARRAY_RESHAPE variable=wv cyclic factor=CONFIG_T::multiply_words
    #pragma HLS ARRAY_RESHAPE variable=wo cyclic factor=CONFIG_T::multiply_words
    typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim];
    typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim];
    typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim];
    typename CONFIG_T::v_t attn[CONFIG_T::len_q][CONFIG_T::dim];
    // token memories: S features (and P keys) of a row in one cycle
    #pragma HLS ARRAY_PARTITION variable=q cyclic factor=S dim=2
    #pragma HLS ARRAY_PARTITION variable=k cyclic factor=P dim=1
    #pragma HLS ARRAY_PARTITION variable=k cyclic factor=S dim=2
    #pragma HLS ARRAY_PARTITION variable=v cyclic factor=P dim=1
    #pragma HLS ARRAY_PARTITION variable=v cyclic factor=S dim=2
    #pragma HLS ARRAY_PARTITION variable=attn cyclic factor=S dim=2

    folded_project_pre<CONFIG_T>(xc, yc, wq, wk, wv, q, k, v);
    folded_attend_all<CONFIG_T>(q, k, v, wq, wk, length, offset, exp_table, recip_table, attn);
    folded_project_post<CONFIG_T>(attn, wo, z);
}

// The buffers of a folded layer's DATAFLOW region around its compute: the input codes xc, yc
// (S features a cycle) and the output codes z (partitioned by each layer for its output).
#define NNET_FOLDED_CODES(CONFIG_T)                                                                \
    typename CONFIG_T::in_code_t xc[CONFIG_T::len_q][CONFIG_T::dim];                               \
    typename CONFIG_T::in_code_t yc[CONFIG_T::len_k][CONFIG_T::dim];                               \
    typename CONFIG_T::out_code_t z[CONFIG_T::len_q][CONFIG_T::dim];                               \
    _Pragma("HLS ARRAY_PARTITION variable=xc cyclic factor=CONFIG_T::simd dim=2")                  \
    _Pragma("HLS ARRAY_PARTITION variable=yc cyclic factor=CONFIG_T::simd dim=2")

// -- the layers hls4ml calls (eatt.hls.handlers); CONFIG_T::folded is the mechanism's form --
// io_parallel: x, y, res arrays of real values (hls4ml's io_parallel ports)
template <class x_T, class y_T, class res_T, typename CONFIG_T>
void folded_attention(x_T x[CONFIG_T::len_q * CONFIG_T::dim], y_T y[CONFIG_T::len_k * CONFIG_T::dim],
                      unsigned length, unsigned offset, res_T res[CONFIG_T::len_q * CONFIG_T::dim],
                      NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)) {
    #pragma HLS DATAFLOW
    NNET_FOLDED_CODES(CONFIG_T)
    #pragma HLS ARRAY_PARTITION variable=z cyclic factor=CONFIG_T::pe dim=2
    folded_load<x_T, CONFIG_T, CONFIG_T::len_q>(x, xc);
    folded_load<y_T, CONFIG_T, CONFIG_T::len_k>(y, yc);
    folded_attention_compute<CONFIG_T>(xc, yc, length, offset, wq, wk, wv, wo, exp_table,
                                       recip_table, z);
    attention_core_write<res_T, CONFIG_T>(z, res);  // the output, as the unrolled core's
}

} // namespace nnet

#ifndef __SYNTHESIS__
// the count, for the C simulation's caller (ctypes): read and reset
extern "C" __attribute__((weak)) unsigned long eatt_folded_iterations(int reset) {
    unsigned long n = nnet::folded_iteration_count();
    if (reset) nnet::folded_iteration_count() = 0;
    return n;
}
#endif

#endif
