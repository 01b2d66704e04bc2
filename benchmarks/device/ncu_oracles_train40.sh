set -u
D=tests/data/recordings/ncu; W=/dev/shm/o; mkdir -p $W
xz -dc $D/train40_threads.ncu-rep.xz > $W/t.ncu-rep
ncu --import $W/t.ncu-rep --csv --page details --print-units base > $W/train40_threads.details.csv
ncu --import $W/t.ncu-rep --csv --page raw --print-units base > $W/train40_threads.raw.csv
ncu --import $W/t.ncu-rep --page details > $OUT/train40_threads.details.txt
xz -c $W/train40_threads.details.csv > $OUT/train40_threads.details.csv.xz
xz -c $W/train40_threads.raw.csv > $OUT/train40_threads.raw.csv.xz
ls -la $OUT; ncu --version | tail -1
