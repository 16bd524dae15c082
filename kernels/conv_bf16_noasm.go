//go:build !amd64 || noasm

package kernels

// directBF16 is empty without the assembly kernels.
type directBF16 struct{}

func (c *convBF16) forwardDirect(w []uint16) bool { return false }
func (c *convBF16) padRows(lo, hi int)            {}
func (c *convBF16) packDirectB(lo, hi int)        {}
func (c *convBF16) directRows(lo, hi int)         {}
func (c *convBF16) directPanels(lo, hi int)       {}

func directFitsBF16(s *ConvShape) bool    { return false }
func gatherFitsBF16(s *ConvShape) bool    { return false }
func pointwiseFitsBF16(s *ConvShape) bool { return false }

func (c *convBF16) pointPanels(lo, hi int) {}

func (c *convBF16) backwardWeightInPlace(x, dy []uint16, dw []float32) bool { return false }
func (c *convBF16) gatherPanels(lo, hi int)                                 {}

func (p *convBF16Packed) directB(s *ConvShape, w []uint16) [][]uint32 { return nil }
