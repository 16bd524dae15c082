package kernels_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/kernels"
)

// A pool of one pinned thread: the GEMM inside Do runs on it alone, while
// kernels called elsewhere keep the process-wide workers.
func ExampleNewPool() {
	cores, err := kernels.AvailableCores()
	if err != nil {
		log.Fatal(err)
	}
	pool, err := kernels.NewPool(cores[:1])
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	a := []float32{1, 2, 3, 4} // 2×2
	b := []float32{5, 6, 7, 8} // 2×2
	c := make([]float32, 4)
	pool.Do(func() {
		fmt.Println("threads inside:", kernels.Threads())
		kernels.Sgemm(false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2)
	})
	fmt.Println(c)
	// Output:
	// threads inside: 1
	// [19 22 43 50]
}
