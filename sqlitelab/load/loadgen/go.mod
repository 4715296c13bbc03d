module sqlitelab/loadgen

go 1.22
