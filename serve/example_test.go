package serve_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/serve"
)

// A frozen graph behind an HTTP handler: here ReLU of the input, traced
// from a function; in practice a model traced and saved with graph.Save,
// loaded with graph.Load.
func ExampleNew() {
	x := autograd.FromFloat32([]float32{0, 0, 0}, 1, 3)
	g, err := graph.TraceFunc(nn.NewSequential(), func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{autograd.ReLU(in[0])}
	}, x)
	if err != nil {
		log.Fatal(err)
	}
	s, err := serve.New(g, serve.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	hs := httptest.NewServer(s) // or http.ListenAndServe(":8080", s)
	defer hs.Close()

	resp, err := http.Post(hs.URL+"/predict", "application/json",
		strings.NewReader(`{"inputs": [{"shape": [1, 3], "data": [-1, 0.5, 2]}]}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, " ", string(body))
	// Output: 200 OK {"outputs":[{"name":"%1","dtype":"float32","shape":[1,3],"data":[0,0.5,2]}]}
}
