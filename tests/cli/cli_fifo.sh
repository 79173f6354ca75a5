#!/bin/sh
# FIFOs (named pipes) as inputs never hang the program. Data files (csv:TRAIN[,TEST], predict
# --input, the files of idx:DIR and images:DIR, cltrain plot's metrics files) are refused at
# once, naming the file: "is a FIFO (named pipe), not a regular file". A model spec may come
# from a pipe: the shell's <(echo ...) and a named FIFO whose writer comes a little later are
# read; a FIFO that no writer ever opens is an error after 5 s. Every command runs under
# `timeout`, so a regression fails (exit 124) instead of hanging the suite. Needs CLTRAIN_BIN
# (meson test); one step of training writes the checkpoint that eval and predict load.
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
make_tmp

T="timeout 20 $CLTRAIN_BIN"
printf 'a,b,label\n1,2,0\n3,4,1\n5,6,2\n1,1,0\n' >"$tmp/train.csv"
mkfifo "$tmp/fifo"

# -- data: refused before anything is read, whether or not a writer ever comes ----------------
check_bad "--data csv:FIFO" "fifo" "is a FIFO (named pipe), not a regular file" -- \
    $T train --data "csv:$tmp/fifo" --model "linear 3" --steps 1
check_bad "--data csv:TRAIN,FIFO" "fifo" "is a FIFO (named pipe), not a regular file" -- \
    $T train --data "csv:$tmp/train.csv,$tmp/fifo" --model "linear 3" --steps 1
check_ok "a checkpoint to evaluate" -- \
    $T train --data "csv:$tmp/train.csv" --model "linear 3" --steps 1 --save "$tmp/ck.safetensors"
check_bad "eval --data csv:FIFO" "fifo" "is a FIFO (named pipe)" -- \
    $T eval --load "$tmp/ck.safetensors" --data "csv:$tmp/fifo"
check_bad "predict --input FIFO" "fifo" "is a FIFO (named pipe), not a regular file" -- \
    $T predict --load "$tmp/ck.safetensors" --input "$tmp/fifo" --output "$tmp/p.csv"
need_python3 "to write the IDX test data"
write_idx "$tmp/idx" 8 4
rm "$tmp/idx/train-images-idx3-ubyte.gz"
mkfifo "$tmp/idx/train-images-idx3-ubyte.gz"
check_bad "--data idx:DIR with a FIFO" "train-images-idx3-ubyte.gz" "is a FIFO (named pipe)" -- \
    $T train --data "idx:$tmp/idx" --model "linear 3" --steps 1
mkdir -p "$tmp/img/a" "$tmp/img/b"
mkfifo "$tmp/img/a/x.png" "$tmp/img/b/y.png"
check_bad "--data images:DIR with FIFOs named *.png" "x.png" "is a FIFO (named pipe)" -- \
    $T train --data "images:$tmp/img" --model "flatten, linear 2" --steps 1
# an anonymous pipe (what the shell's <(...) gives, here as /dev/stdin) likewise
printf 'a,b,label\n1,2,0\n' | check_bad "--data csv:/dev/stdin (a pipe)" "/dev/stdin" \
    "is a FIFO (named pipe)" -- $T train --data "csv:/dev/stdin" --model "linear 3" --steps 1

# -- model specs: read from a pipe; no writer is an error after 5 s ---------------------------
# "linear 7" on 3 classes: refused by validation, which shows the text was read (before any
# device is opened)
echo "linear 7" | check_bad "--model /dev/stdin (a pipe)" "the last linear layer has 7 outputs" -- \
    $T train --data "csv:$tmp/train.csv" --model /dev/stdin --steps 1
(sleep 1 && echo "linear 7" >"$tmp/fifo") &
writer=$!
check_bad "--model FIFO, its writer a second late" "the last linear layer has 7 outputs" -- \
    $T train --data "csv:$tmp/train.csv" --model "$tmp/fifo" --steps 1
wait "$writer" || fail "the FIFO's writer failed"
start=$(date +%s)
check_bad "--model FIFO without a writer" "fifo" "FIFO (named pipe)" "nothing was written" -- \
    $T train --data "csv:$tmp/train.csv" --model "$tmp/fifo" --steps 1
took=$(($(date +%s) - start))
[ "$took" -le 12 ] || fail "--model FIFO without a writer took $took s, expected about 5"
check_bad "--model DIRECTORY" "is a directory" "read from a file or a pipe" -- \
    $T train --data "csv:$tmp/train.csv" --model "$tmp/idx" --steps 1

# -- cltrain plot's metrics files: regular files only -----------------------------------------
check_bad "plot FIFO" "plot $tmp/fifo: is a FIFO (named pipe), not a regular file" -- \
    $T plot "$tmp/fifo" -o "$tmp/p.svg"
check_bad "plot DIRECTORY" "plot $tmp/idx: is a directory, not a regular file" -- \
    $T plot "$tmp/idx" -o "$tmp/p.svg"
