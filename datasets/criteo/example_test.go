package criteo_test

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/datasets/criteo"
)

func Example() {
	// Seven lines of Kaggle data; in practice an *os.File of train.txt.
	var b strings.Builder
	for i := range 7 {
		label := []string{"0", "1"}[i%2]
		ints := strings.Repeat(fmt.Sprint(i)+"\t", 12) + "-5"
		cats := strings.Repeat([]string{"68fd1e64", "05db9164"}[i%2]+"\t", 25) // C26 empty
		b.WriteString(label + "\t" + ints + "\t" + cats + "\n")
	}
	data := strings.NewReader(b.String())

	ix, err := criteo.Scan(data, criteo.ScanOptions{File: "train.txt"})
	if err != nil {
		fmt.Println(err)
		return
	}
	counts := ix.Counts()
	fmt.Println("lines:", ix.Len(), "rows of C1, C26:", counts[0], counts[25])

	split := criteo.KaggleSplit(ix.Len())
	train := ix.Select(split.Train, 0, 1) // --data-sub-sample-rate 0
	for batch, err := range ix.Batches(data, train, 4) {
		if err != nil {
			fmt.Println(err)
			return
		}
		// Dense row 0: I1 = log(i+1), I13 = -5 clipped to 0.
		fmt.Printf("B=%d labels %v C1 ids %v I1 %.3f I13 %v\n",
			batch.Size(), batch.Labels, batch.Indices[0], batch.Dense[0], batch.Dense[12])
	}
	// Output:
	// lines: 7 rows of C1, C26: 2 1
	// B=4 labels [0 1 0 1] C1 ids [0 1 0 1] I1 0.000 I13 0
	// B=2 labels [0 1] C1 ids [0 1] I1 1.609 I13 0
}
