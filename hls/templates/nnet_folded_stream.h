// The folded layer with hls4ml's io_stream ports (folded_attention_stream): the io_parallel
// layer's processes (nnet_folded_attention.h) between a load and an output of streams.

#ifndef NNET_FOLDED_STREAM_H_
#define NNET_FOLDED_STREAM_H_

#include "hls_stream.h"
#include "nnet_folded_attention.h"

namespace nnet {

// -- io_stream: one token (dim values) a beat on x, y and res (hls4ml's io_stream, AXI4-Stream
// at the top): a token's beat is read in the first of its DC load cycles, and res gets one beat
// a cycle after the output projection (len_q more iterations than io_parallel) ---------------
template <class data_T, typename CONFIG_T, unsigned N_ROWS>
void folded_load_stream(hls::stream<data_T> &data,
                        typename CONFIG_T::in_code_t codes[N_ROWS][CONFIG_T::dim]) {
    #pragma HLS INLINE off
    data_T beat;
LoadStreamRow:
    for (unsigned i = 0; i < N_ROWS; i++) {
    LoadStreamChunk:
        for (unsigned c = 0; c < CONFIG_T::dim / CONFIG_T::simd; c++) {
            #pragma HLS PIPELINE II=1
            FOLDED_CYCLE();
            if (c == 0) beat = data.read();
            folded_load_chunk<CONFIG_T>(beat, 0, c, codes[i]);
        }
    }
}

// one value of a mask input's stream (a beat of one element)
template <class mask_T> unsigned folded_mask_read(hls::stream<mask_T> &mask) {
    #pragma HLS INLINE
    mask_T beat = mask.read();
    return beat[0].to_uint();
}

template <class x_T, class y_T, class res_T, typename CONFIG_T>
void folded_attention_stream(
    hls::stream<x_T> &x, hls::stream<y_T> &y, unsigned length, unsigned offset,
    hls::stream<res_T> &res, NNET_ATTENTION_WEIGHT_ARGS(CONFIG_T)) {
    #pragma HLS DATAFLOW
    NNET_FOLDED_CODES(CONFIG_T)
    #pragma HLS ARRAY_PARTITION variable=z complete dim=2
    folded_load_stream<x_T, CONFIG_T, CONFIG_T::len_q>(x, xc);
    folded_load_stream<y_T, CONFIG_T, CONFIG_T::len_k>(y, yc);
    folded_attention_compute<CONFIG_T>(xc, yc, length, offset, wq, wk, wv, wo, exp_table,
                                       recip_table, z);
OutStreamRow:
    for (unsigned i = 0; i < CONFIG_T::len_q; i++) {
        #pragma HLS PIPELINE II=1
        FOLDED_CYCLE();
        res_T beat;
        PRAGMA_DATA_PACK(beat)
    OutStreamCol:
        for (unsigned c = 0; c < CONFIG_T::dim; c++) {
            #pragma HLS UNROLL
            beat[c] = attention_core_out_real<CONFIG_T>(z[i][c]);
        }
        res.write(beat);
    }
}

} // namespace nnet

#endif
