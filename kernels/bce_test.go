package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBCEKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	n := 3*lossBlock + 17
	p, tg, g := make([]float32, n), make([]float32, n), normRandom(r, n, 0)
	ends := []float32{0, 1, 0x1p-149, 1e-20, 1 - 0x1p-24}
	for i := range p {
		p[i], tg[i] = r.Float32(), r.Float32()
		if i%97 < len(ends) {
			p[i] = ends[i%97]
		}
	}
	out, ok := guarded(t, n)
	BCE(p, tg, out)
	ok()
	dp, okP := guarded(t, n)
	dt, okT := guarded(t, n)
	const scale = 0.5
	BCEBackward(p, tg, g, scale, dp, dt)
	okP()
	okT()
	sum := 0.0
	for i := range p {
		pf, tf := float64(p[i]), float64(tg[i])
		q := float64(float32(1) - p[i])
		want := -(tf*math.Max(math.Log(pf), -100) + (1-tf)*math.Max(math.Log(q), -100))
		if d := math.Abs(float64(out[i]) - want); d > 1e-6*math.Abs(want) {
			t.Fatalf("loss %d (p %v, t %v) = %v, want %v", i, p[i], tg[i], out[i], want)
		}
		sum += float64(out[i])
		wantDP := scale * float64(g[i]) * (pf - tf) / math.Max(q*pf, 1e-12)
		if d := math.Abs(float64(dp[i]) - wantDP); d > 1e-6*math.Abs(wantDP) {
			t.Fatalf("dp %d (p %v, t %v) = %v, want %v", i, p[i], tg[i], dp[i], wantDP)
		}
		wantDT := scale * float64(g[i]) * (math.Log(q) - math.Log(pf))
		if d := math.Abs(float64(dt[i]) - wantDT); !(d <= 1e-6*math.Abs(wantDT)) && float64(dt[i]) != wantDT {
			t.Fatalf("dt %d (p %v, t %v) = %v, want %v", i, p[i], tg[i], dt[i], wantDT)
		}
	}
	if s := BCESum(p, tg); math.Abs(s-sum) > 1e-6*sum {
		t.Fatalf("sum %v, want %v", s, sum)
	}
	// One shared gradient value, and skipped outputs.
	BCEBackward(p, tg, g[:1], 1, nil, dt)
	if want := float32(float64(g[0]) * (math.Log(float64(1-p[5])) - math.Log(float64(p[5])))); dt[5] != want {
		t.Fatalf("shared gradient: dt[5] = %v, want %v", dt[5], want)
	}
	checkMisuse(t, []misuseCase{
		{"short target", ErrShape, func() { BCE(p, tg[:n-1], out) }},
		{"short out", ErrShape, func() { BCE(p, tg, out[:n-1]) }},
		{"short sum target", ErrShape, func() { BCESum(p, tg[:1]) }},
		{"gradient length", ErrShape, func() { BCEBackward(p, tg, g[:2], 1, dp, nil) }},
		{"short dt", ErrShape, func() { BCEBackward(p, tg, g, 1, nil, dt[:3]) }},
	})
}
