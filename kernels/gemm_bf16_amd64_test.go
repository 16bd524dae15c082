//go:build !noasm

package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGemmBF16Split checks that the blocked loop gives the same bits
// however it splits the product: whole column blocks per worker, row
// panels per worker, or all on one goroutine, with B packed by the call or
// packed beforehand.
func TestGemmBF16Split(t *testing.T) {
	if !sbgemmAsm() {
		t.Skipf("no AVX512_BF16 kernel at level %v", level)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][3]int{{12, 512, 9}, {50, 1024, 1030}, {37, 768, 64}, {100, 600, 1100}, {1, 2048, 5}} {
		m, n, k := sh[0], sh[1], sh[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(t *testing.T) {
			a, b := bf16Rand(r, m*k), bf16Rand(r, k*n)
			c0 := make([]float32, m*n)
			for i := range c0 {
				c0[i] = float32(r.NormFloat64())
			}
			// With ep, rows are finished as the convolutions finish them:
			// bias added, then rounded with a ReLU and a residual into
			// a bfloat16 output.
			bias, res := make([]float32, n), bf16Rand(r, m*n)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			run := func(serial bool, pre *sbPackedB, epilogue bool) ([]float32, []uint16) {
				c := slices.Clone(c0)
				var ep *sbRowEpilogue
				var y []uint16
				if epilogue {
					y = make([]uint16, m*n)
					ep = &sbRowEpilogue{bias: bias, stage: bf16Stage{y: y, res: res, act: Act{Fn: ActReLU}, activate: true}}
				}
				g := sbgemmCalls.get()
				defer sbgemmCalls.put(g)
				g.sbgemmArgs = sbgemmArgs{m: m, n: n, k: k, alpha: 1, a: a, lda: k, b: b, ldb: n, beta: 0.5, c: c, ldc: n,
					pre: pre, serial: serial, ep: ep}
				g.blocked()
				g.sbgemmArgs = sbgemmArgs{}
				return c, y
			}
			for _, epilogue := range []bool{false, true} {
				want, wantY := run(true, nil, epilogue)
				for _, v := range []struct {
					name   string
					serial bool
					pre    *sbPackedB
				}{
					{"split", false, nil},
					{"prepacked", false, packSbgemmB(false, k, n, b, n)},
					{"prepacked serial", true, packSbgemmB(false, k, n, b, n)},
				} {
					c, y := run(v.serial, v.pre, epilogue)
					for i := range want {
						if c[i] != want[i] {
							t.Fatalf("%s (epilogue %v): C[%d][%d] = %v, on one goroutine %v", v.name, epilogue, i/n, i%n, c[i], want[i])
						}
					}
					if !slices.Equal(y, wantY) {
						t.Fatalf("%s: the rounded output differs from one goroutine's", v.name)
					}
				}
			}
		})
	}
}
