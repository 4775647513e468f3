"""rtl_sim stage."""
