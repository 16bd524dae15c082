package criteo_test

import (
	"fmt"
	"os"
	"path/filepath"
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
	train, err := ix.Select(split.Train, 0, 1) // --data-sub-sample-rate 0
	if err != nil {
		fmt.Println(err)
		return
	}
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

func ExampleNewPlanted() {
	cfg := criteo.DefaultPlanted(5000, 1) // 8 tables of 1000 rows
	p, err := criteo.NewPlanted(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := p.Stats()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d samples, %.0f%% clicks, oracle AUC %.2f\n",
		st.Samples, 100*float64(st.Positives)/float64(st.Samples), st.OracleAUC)

	// In memory: a training split in batches, with no TSV round trip.
	split := criteo.KaggleSplit(p.Len())
	train := make([]int, 0, split.Train.Len())
	for i := split.Train.Start; i < split.Train.End; i++ {
		train = append(train, i)
	}
	for b, err := range p.Batches(train, 2048) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("batch of", b.Size(), "tables", len(p.Rows()), "C1 ids", b.Indices[0][:4])
	}

	// As a Kaggle file: Scan sees the same distinct values.
	var file strings.Builder
	if err := p.WriteTSV(&file); err != nil {
		fmt.Println(err)
		return
	}
	ix, err := criteo.Scan(strings.NewReader(file.String()), criteo.ScanOptions{File: "planted.txt"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("scanned", ix.Len(), "lines; counts match:", ix.Counts() == st.Counts)
	// Output:
	// 5000 samples, 34% clicks, oracle AUC 0.89
	// batch of 2048 tables 8 C1 ids [1 3 12 1]
	// batch of 2048 tables 8 C1 ids [0 0 68 67]
	// batch of 190 tables 8 C1 ids [20 7 88 777]
	// scanned 5000 lines; counts match: true
}

func ExampleNewRandom() {
	// dlrm_s_pytorch.py --data-generation=random --arch-mlp-bot=4-3-2
	// --arch-embedding-size=4-3-2 --data-size=5 --mini-batch-size=2
	// --num-indices-per-lookup=3
	r, err := criteo.NewRandom(criteo.RandomConfig{
		DenseFeatures: 4, TableSizes: []int{4, 3, 2},
		DataSize: 5, MiniBatchSize: 2, IndicesPerLookup: 3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for b, err := range r.Batches() {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("n=%d table 0: indices %v offsets %v\n", b.Size(), b.Indices[0], b.Offsets[0])
	}
	// Output:
	// n=2 table 0: indices [0 1 0] offsets [0 2]
	// n=2 table 0: indices [0 1 2] offsets [0 1]
	// n=1 table 0: indices [0 1 2] offsets [0]
}

func ExampleScanFile() {
	dir, err := os.MkdirTemp("", "criteo")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "train.txt")
	line := "1\t" + strings.Repeat("3\t", 13) + strings.Repeat("68fd1e64\t", 25) + "05db9164\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, 3)), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	// The first call scans train.txt and writes train.txt.kiln-index; the
	// second reads the sidecar instead of the data.
	for range 2 {
		ix, err := criteo.ScanFile(path, criteo.ScanOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		_, serr := os.Stat(path + criteo.SidecarSuffix)
		fmt.Println("lines:", ix.Len(), "sidecar written:", serr == nil)
	}
	// Output:
	// lines: 3 sidecar written: true
	// lines: 3 sidecar written: true
}

func ExampleDaySet_Order() {
	dir, err := os.MkdirTemp("", "criteo-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "train.txt")
	f, err := os.Create(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := criteo.NewPlanted(criteo.DefaultPlanted(7000, 1))
	if err := p.WriteTSV(f); err != nil {
		fmt.Println(err)
		return
	}
	f.Close()

	// The first open scans train.txt into its sidecar; memory holds the
	// dictionaries, and the training order no list of lines.
	set, err := criteo.OpenKaggle(path, criteo.ScanOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Close()
	split := set.Split()
	train, err := set.Order(split.Days[:len(split.Days)-1], 0.5, 1, criteo.RandomizeTotal)
	if err != nil {
		fmt.Println(err)
		return
	}
	// An epoch resumed at batch k would pass k·2048 for 0: it reads no
	// batch before.
	batches, samples := 0, 0
	for b, err := range train.Batches(2048, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		batches, samples = batches+1, samples+b.Size()
	}
	fmt.Println("training lines:", split.Train.Len(), "kept:", train.Len(), "batches:", batches, "samples:", samples == train.Len())
	// Output:
	// training lines: 6000 kept: 3969 batches: 2 samples: true
}
