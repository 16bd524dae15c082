package quant

import (
	"os"
	"testing"

	"github.com/kilnml/kiln/internal/uninit"
)

func TestMain(m *testing.M) { os.Exit(uninit.RunPoisoned(m)) }
