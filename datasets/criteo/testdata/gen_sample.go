//go:build ignore

// gen_sample writes sample.txt, a small Kaggle-format file for the tests:
//
//	go run gen_sample.go > sample.txt
//
// It is deterministic (a fixed PCG seed). About a quarter of the labels
// are 1; integer fields are sometimes empty or negative; categoricals are
// drawn from a small pool per feature so values repeat, and are sometimes
// empty.
package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

func main() {
	rng := rand.New(rand.NewPCG(19, 2014))
	pools := make([][]uint32, 26)
	for t := range pools {
		pools[t] = make([]uint32, 2+t*3)
		for i := range pools[t] {
			pools[t][i] = rng.Uint32()
		}
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for range 200 {
		f := make([]string, 0, 40)
		if rng.IntN(4) == 0 {
			f = append(f, "1")
		} else {
			f = append(f, "0")
		}
		for range 13 {
			switch r := rng.IntN(10); {
			case r == 0:
				f = append(f, "")
			case r == 1:
				f = append(f, fmt.Sprint(-1-rng.IntN(3)))
			default:
				f = append(f, fmt.Sprint(rng.IntN(1000)))
			}
		}
		for t := range 26 {
			if rng.IntN(12) == 0 {
				f = append(f, "")
				continue
			}
			f = append(f, fmt.Sprintf("%08x", pools[t][rng.IntN(len(pools[t]))]))
		}
		fmt.Fprintln(w, strings.Join(f, "\t"))
	}
}
