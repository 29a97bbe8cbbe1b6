#!/bin/sh
# Writes the small generated seed inputs of the mtx_reader target into corpus/mtx_reader
# (git-ignored). Run from the fuzz/ directory before the first `cargo fuzz run mtx_reader`.
set -eu
d=corpus/mtx_reader
mkdir -p "$d"
printf '%%%%MatrixMarket matrix coordinate real general\n%% comment\n3 4 4\n1 1 1.5\n3 4 -2e-3\n2 2 inf\n1 1 0.25\n' > "$d/coord_real"
printf '%%%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n4 4\n3 2\n' > "$d/pattern_sym"
printf '%%%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 -7\n3 1 128\n' > "$d/int_skew"
printf '%%%%MatrixMarket matrix array real general\n2 3\n1\n-0\n3.5\n1e300\n5e-324\nNaN\n' > "$d/array_general"
printf '%%%%MatrixMarket matrix array integer symmetric\n3 3\n1\n2\n3\n4\n5\n6\n' > "$d/array_sym"
printf '%%%%MatrixMarket matrix array real skew-symmetric\r\n3 3\r\n1\r\n2\r\n3\r\n' > "$d/array_skew_crlf"
printf '%%%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 0\n' > "$d/complex"
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n' | gzip -n -c > "$d/coord_gz"
