"""quant stage."""
