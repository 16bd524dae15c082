//go:build !noasm

package kernels

// amxBF16Strip is the AMX kernel of GemmBF16 (gemm_amx_amd64.s): an
// amxStripFunc. It loads the tile configuration itself and releases the
// tiles before it returns, so no tile state outlives a call: the
// goroutine may resume on another thread after any call.
//
//go:noescape
func amxBF16Strip(cfg *amxTileConfig, a *uint16, b *uint32, c *float32, steps, blocks int)

// amxAsmKernel returns the AMX kernel where this CPU's level is AMX.
func amxAsmKernel() amxStripFunc {
	if level >= AMX {
		return amxBF16Strip
	}
	return nil
}
