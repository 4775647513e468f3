// The projection walks of the folded layer (nnet_folded_attention.h, which includes this header):
// one S x COLS tile of weights a cycle, additions only on the select walk (E-ATT's Q, K), products
// on the multiply walk (dot Q, K; V; O; Dense's hidden layer), the RTL engine's two walks
// (rtl_sim/rtl/folded_attention.sv, docs/folded.md). Also the iteration count the C simulation
// keeps (FOLDED_CYCLE: one II=1 iteration, one cycle) for every process of the layer.
//
// Weights come tile by tile, as the RTL's ROMs (eatt.rtl_sim.folded.weight_tiles): tile (row
// chunk rc, column chunk cc) at word cc DC + rc holds w[rc S + r][cc COLS + c] at field
// r COLS + c (DC = dim / S). The E-ATT select walk (folded_select_tile, folded_select_step,
// folded_eatt_project but for its V walk) holds no multiplication (tests/test_hls_folded.py
// scans them): index arithmetic there is running counters.

#ifndef NNET_FOLDED_WALKS_H_
#define NNET_FOLDED_WALKS_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_common.h"

namespace nnet {

#ifndef __SYNTHESIS__
// pipelined-loop iterations of every call so far (one II=1 iteration is one cycle)
inline unsigned long &folded_iteration_count() {
    static unsigned long count = 0;
    return count;
}
#define FOLDED_CYCLE() (folded_iteration_count()++)
#else
#define FOLDED_CYCLE()
#endif

// -- one S x COLS tile: S input features of one token, COLS output columns --------------------
// select walk (E-ATT Q, K): each set bit adds its weight row's COLS entries. Additions only.
template <class acc_T, class w_T, unsigned S, unsigned COLS>
void folded_select_tile(const bool bits[S], const w_T tile[S * COLS], acc_T acc[COLS]) {
    #pragma HLS INLINE
SelTileCol:
    for (unsigned c = 0; c < COLS; c++) {
        #pragma HLS UNROLL
        unsigned f = c;
    SelTileRow:
        for (unsigned r = 0; r < S; r++) {
            #pragma HLS UNROLL
            if (bits[r]) acc[c] += tile[f];
            f += COLS;
        }
    }
}

// multiply walk (dot Q, K; V; O): acc[c] += sum_r a[r] w[r][c]
template <class acc_T, class a_T, class w_T, unsigned S, unsigned COLS>
void folded_multiply_tile(const a_T a[S], const w_T tile[S * COLS], acc_T acc[COLS]) {
    #pragma HLS INLINE
MulTileCol:
    for (unsigned c = 0; c < COLS; c++) {
        #pragma HLS UNROLL
    MulTileRow:
        for (unsigned r = 0; r < S; r++) {
            #pragma HLS UNROLL
            acc[c] += a[r] * tile[r * COLS + c];
        }
    }
}

// -- one projection step of a walk: one tile of one token ----------------------------------------
// rbase: the tile's first input feature (row chunk rc x S); tile: its S x COLS weights. Index
// arithmetic is running counters in the callers, so the select path holds no `*` at all.
// select: acc += the tile's rows picked by the token's bits rbase .. rbase + S - 1 (Eq. 4, 6-9)
template <typename CONFIG_T, class w_T>
void folded_select_step(const typename CONFIG_T::in_code_t token[CONFIG_T::dim],
                        const w_T tile[CONFIG_T::select_words], unsigned rbase,
                        typename CONFIG_T::qacc_t acc[CONFIG_T::simd]) {
    #pragma HLS INLINE
    bool bits[CONFIG_T::simd];
    #pragma HLS ARRAY_PARTITION variable=bits complete
SelBits:
    for (unsigned r = 0; r < CONFIG_T::simd; r++) {
        #pragma HLS UNROLL
        bits[r] = token[rbase + r] > CONFIG_T::tau_int;  // Eq. 4 (strict)
    }
    folded_select_tile<typename CONFIG_T::qacc_t, w_T, CONFIG_T::simd, CONFIG_T::simd>(bits, tile,
                                                                                      acc);
}

// multiply: acc += token[rbase .. rbase + S - 1] x the tile's COLS columns
template <typename CONFIG_T, unsigned COLS, class a_T, class w_T, class acc_T>
void folded_multiply_step(const a_T token[CONFIG_T::dim], const w_T *tile, unsigned rbase,
                          acc_T acc[COLS]) {
    #pragma HLS INLINE
    a_T a[CONFIG_T::simd];
    #pragma HLS ARRAY_PARTITION variable=a complete
MulIn:
    for (unsigned r = 0; r < CONFIG_T::simd; r++) {
        #pragma HLS UNROLL
        a[r] = token[rbase + r];
    }
    folded_multiply_tile<acc_T, a_T, w_T, CONFIG_T::simd, COLS>(a, tile, acc);
}

// -- a whole projection of N_ROWS tokens on the multiply walk: out = (in W) >> SHIFT ----------
// S x COLS tiles, DC row chunks x dim / COLS column chunks a token, one tile a cycle; RELU:
// max(out, 0) (Dense's hidden layer: after the requantization, a floor, so the same either way)
template <typename CONFIG_T, unsigned N_ROWS, unsigned COLS, unsigned SHIFT, class a_T, class w_T,
          class acc_T, bool RELU = false, class out_T>
void folded_multiply_project(a_T in[N_ROWS][CONFIG_T::dim],
                             const w_T w[CONFIG_T::dim * CONFIG_T::dim],
                             out_T out[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE
    const unsigned DC = CONFIG_T::dim / CONFIG_T::simd;
    acc_T acc[COLS];
    #pragma HLS ARRAY_PARTITION variable=acc complete
MulProjToken:
    for (unsigned t = 0; t < N_ROWS; t++) {
        unsigned word = 0;  // tile (rc, cc) is word cc DC + rc: rc inner, so a running count
        unsigned rbase = 0;
    MulProjCol:
        for (unsigned col = 0; col < CONFIG_T::dim; col += COLS) {
        MulProjRow:
            for (unsigned rc = 0; rc < DC; rc++) {
                #pragma HLS PIPELINE II=1
                FOLDED_CYCLE();
                if (rc == 0) {
                    for (unsigned c = 0; c < COLS; c++) acc[c] = 0;
                    rbase = 0;
                }
                folded_multiply_step<CONFIG_T, COLS, a_T, w_T, acc_T>(in[t], &w[word], rbase, acc);
                if (rc == DC - 1) {
                    for (unsigned c = 0; c < COLS; c++) {
                        acc_T shifted = acc[c] >> SHIFT;
                        out[t][col + c] = (RELU && shifted < 0) ? acc_T(0) : shifted;
                    }
                }
                word += CONFIG_T::simd * COLS;
                rbase += CONFIG_T::simd;
            }
        }
    }
}

// E-ATT before attention: the two walks at once (the RTL's interleave). Per key token j, the
// multiply walk takes M DC^2 cycles for V_j (S x PE tiles); the select walk does K_j in the
// first DC^2 of them (slot 0) and one Q token in each other slot of DC^2 (Q token
// j (M - 1) + slot - 1, while there is one); the Q tokens left follow. Running counters only.
template <typename CONFIG_T>
void folded_eatt_project(typename CONFIG_T::in_code_t xc[CONFIG_T::len_q][CONFIG_T::dim],
                         typename CONFIG_T::in_code_t yc[CONFIG_T::len_k][CONFIG_T::dim],
                         const typename CONFIG_T::wq_t wq[CONFIG_T::dim * CONFIG_T::dim],
                         const typename CONFIG_T::wk_t wk[CONFIG_T::dim * CONFIG_T::dim],
                         const typename CONFIG_T::wv_t wv[CONFIG_T::dim * CONFIG_T::dim],
                         typename CONFIG_T::qk_t q[CONFIG_T::len_q][CONFIG_T::dim],
                         typename CONFIG_T::qk_t k[CONFIG_T::len_k][CONFIG_T::dim],
                         typename CONFIG_T::v_t v[CONFIG_T::len_k][CONFIG_T::dim]) {
    #pragma HLS INLINE
    const unsigned S = CONFIG_T::simd, PE = CONFIG_T::pe, DC = CONFIG_T::dim / CONFIG_T::simd;
    const unsigned M = CONFIG_T::simd / CONFIG_T::pe, T = CONFIG_T::tiles;
    typename CONFIG_T::qacc_t sacc[S];
    typename CONFIG_T::vacc_t vacc[PE];
    #pragma HLS ARRAY_PARTITION variable=sacc complete
    #pragma HLS ARRAY_PARTITION variable=vacc complete
    unsigned qbase = 0;  // j (M - 1): the first Q token of key token j's slots
PairToken:
    for (unsigned j = 0; j < CONFIG_T::len_k; j++) {
        unsigned rc = 0, rbase = 0;              // row chunk of both walks, its first feature
        unsigned vword = 0, vcol = 0;            // multiply walk: tile word, first column
        unsigned slot = 0, step = 0, sword = 0;  // select walk: slot, tile in it, tile word
        unsigned scol = 0;                       // select walk: first column
    PairStep:
        for (unsigned t = 0; t < CONFIG_T::pair_steps; t++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            // multiply walk: V_j
            if (rc == 0) {
                for (unsigned c = 0; c < PE; c++) vacc[c] = 0;
            }
            folded_multiply_step<CONFIG_T, PE>(yc[j], &wv[vword], rbase, vacc);
            if (rc == DC - 1) {
                for (unsigned c = 0; c < PE; c++) v[j][vcol + c] = vacc[c] >> CONFIG_T::v_shift;
            }
            // select walk: K_j in slot 0, a Q token in the others
            bool key = slot == 0;
            unsigned qi = qbase + slot - 1;
            if (key || qi < CONFIG_T::len_q) {
                if (rc == 0) {
                    for (unsigned c = 0; c < S; c++) sacc[c] = 0;
                }
                if (key) {
                    folded_select_step<CONFIG_T>(yc[j], &wk[sword], rbase, sacc);
                } else {
                    folded_select_step<CONFIG_T>(xc[qi], &wq[sword], rbase, sacc);
                }
                if (rc == DC - 1) {
                    for (unsigned c = 0; c < S; c++) {
                        if (key) {
                            k[j][scol + c] = sacc[c] >> CONFIG_T::q_shift;
                        } else {
                            q[qi][scol + c] = sacc[c] >> CONFIG_T::q_shift;
                        }
                    }
                }
            }
            // the counters
            vword += CONFIG_T::multiply_words;
            sword += CONFIG_T::select_words;
            if (rc == DC - 1) {
                rc = 0;
                rbase = 0;
                vcol += PE;
                scol += S;
            } else {
                rc++;
                rbase += S;
            }
            if (step == T - 1) {
                step = 0;
                slot++;
                sword = 0;
                scol = 0;
            } else {
                step++;
            }
        }
        qbase += M - 1;
    }
RestToken:
    for (unsigned i = qbase; i < CONFIG_T::len_q; i++) {
        unsigned rc = 0, rbase = 0, sword = 0, scol = 0;
    RestStep:
        for (unsigned t = 0; t < T; t++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            if (rc == 0) {
                for (unsigned c = 0; c < S; c++) sacc[c] = 0;
            }
            folded_select_step<CONFIG_T>(xc[i], &wq[sword], rbase, sacc);
            if (rc == DC - 1) {
                for (unsigned c = 0; c < S; c++) q[i][scol + c] = sacc[c] >> CONFIG_T::q_shift;
            }
            sword += CONFIG_T::select_words;
            if (rc == DC - 1) {
                rc = 0;
                rbase = 0;
                scol += S;
            } else {
                rc++;
                rbase += S;
            }
        }
    }
}

} // namespace nnet

#endif
