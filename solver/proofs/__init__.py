"""Legality proofs with z3: the obligations' vocabulary, a program's proofs (verify) and a
memo table's (its boxes), and the layout catalog's."""
