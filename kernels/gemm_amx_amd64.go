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

// amxPackRows packs pairs whole depth pairs of w ≤ 16 columns of a
// row-major B (rows ldb apart from src) into panel with the AVX-512
// packer, zeros in the columns past w, and reports whether it could.
func amxPackRows(panel []uint32, src []uint16, ldb, pairs, w int) bool {
	if !sbgemmAsm() {
		return false
	}
	if w == 16 {
		sbPackPanel(&panel[:pairs*16][0], &src[0], ldb, pairs)
		return true
	}
	clear(panel[:pairs*16])
	sbPackPanelMask(&panel[0], &src[0], 0, ldb, pairs, uint16(1)<<w-1)
	return true
}
