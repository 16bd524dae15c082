package kernels

// Depthwise channels-last convolution (one input channel per group, m =
// O/C outputs per channel). A GEMM per group would multiply matrices with
// an inner dimension of the kernel size alone, so these are direct loops:
// for each pixel and kernel position, one vector operation across all
// channels. The weight, [O][kernel positions] in both layouts, is read as
// its [kernel positions][O] transpose so that operation is contiguous.

func (j *convJob) dwWeights() {
	j.wt = growBuf(&j.wtBuf, j.s.O*j.ks)
	convOps.transpose(j.wt, j.s.O, j.w, j.ks, j.s.O, j.ks)
}

func (j *convJob) dwForward() {
	j.dwWeights()
	Parallel(j.rows, j.s.work(), j.dwForwardFn)
}

// dwForwardRows computes output rows [lo, hi).
func (j *convJob) dwForwardRows(lo, hi int) {
	s := &j.s
	D, H, W, C, O := s.In[0], s.In[1], s.In[2], s.C, s.O
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	KH, KW := s.Kernel[1], s.Kernel[2]
	m := j.og
	for r := lo; r < hi; r++ {
		n, od, oh := r/(OD*OH), r/OH%OD, r%OH
		for ow := range OW {
			p := r*OW + ow
			yrow := j.y[p*O : (p+1)*O]
			if j.bias != nil {
				copy(yrow, j.bias)
			} else {
				clear(yrow)
			}
			for kd := range s.Kernel[0] {
				id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
				if id < 0 || id >= D {
					continue
				}
				for kh := range KH {
					ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
					if ih < 0 || ih >= H {
						continue
					}
					for kw := range KW {
						iw := ow*s.Stride[2] - s.Pad[2] + kw*s.Dil[2]
						if iw < 0 || iw >= W {
							continue
						}
						src := ((n*D+id)*H+ih)*W + iw
						kp := (kd*KH+kh)*KW + kw
						xrow, wrow := j.x[src*C:(src+1)*C], j.wt[kp*O:(kp+1)*O]
						if m == 1 {
							convOps.mulAddTo(yrow, xrow, wrow)
							continue
						}
						for c, xv := range xrow {
							for q := c * m; q < (c+1)*m; q++ {
								yrow[q] += xv * wrow[q]
							}
						}
					}
				}
			}
		}
	}
}

// dwData computes dx by gathering, for each input pixel, what the outputs
// that read it send back, so input rows can be split among workers.
func (j *convJob) dwData() {
	j.dwWeights()
	Parallel(j.inRows, j.s.work(), j.dwDataFn)
}

// dwDataRows computes input rows [lo, hi) of dx. The output depth and row
// each kernel depth and row maps to are found once per input row; each
// pixel still adds its contributions in kernel order (kd, kh, kw).
func (j *convJob) dwDataRows(lo, hi int) {
	s := &j.s
	D, H, W, C, O := s.In[0], s.In[1], s.In[2], s.C, s.O
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	KH, KW := s.Kernel[1], s.Kernel[2]
	sw := s.Stride[2]
	m := j.og
	for r := lo; r < hi; r++ {
		n, id, ih := r/(D*H), r/H%D, r%H
		clear(j.dx[r*W*C : (r+1)*W*C])
		for kd := range s.Kernel[0] {
			t := id + s.Pad[0] - kd*s.Dil[0]
			if t < 0 || t%s.Stride[0] != 0 || t/s.Stride[0] >= OD {
				continue
			}
			od := t / s.Stride[0]
			for kh := range KH {
				u := ih + s.Pad[1] - kh*s.Dil[1]
				if u < 0 || u%s.Stride[1] != 0 || u/s.Stride[1] >= OH {
					continue
				}
				orow := ((n*OD+od)*OH + u/s.Stride[1]) * OW
				for iw := range W {
					i := r*W + iw
					dxrow := j.dx[i*C : (i+1)*C]
					for kw := range KW {
						v := iw + s.Pad[2] - kw*s.Dil[2]
						if v < 0 {
							break // v only falls as kw grows
						}
						if sw != 1 {
							if v%sw != 0 {
								continue
							}
							v /= sw
						}
						if v >= OW {
							continue
						}
						p := orow + v
						kp := (kd*KH+kh)*KW + kw
						dyrow, wrow := j.dy[p*O:(p+1)*O], j.wt[kp*O:(kp+1)*O]
						if m == 1 {
							convOps.mulAddTo(dxrow, dyrow, wrow)
							continue
						}
						for c := range dxrow {
							var acc float32
							for q := c * m; q < (c+1)*m; q++ {
								acc += dyrow[q] * wrow[q]
							}
							dxrow[c] += acc
						}
					}
				}
			}
		}
	}
}

// dwWeight computes dw. Output rows are cut into a fixed number of parts,
// each accumulating a [kernel positions][O] partial gradient; the parts
// are added in order, so the result does not depend on the thread count.
func (j *convJob) dwWeight() {
	s := &j.s
	j.parts = min(32, j.rows)
	j.partRows = (j.rows + j.parts - 1) / j.parts
	j.parts = (j.rows + j.partRows - 1) / j.partRows
	per := j.ks * s.O
	j.partial = growBuf(&j.partBuf, j.parts*per)
	Parallel(j.parts, s.work(), j.dwWeightFn)
	acc := growBuf(&j.part64Buf, per)
	clear(acc)
	for p := range j.parts {
		for i, v := range j.partial[p*per : (p+1)*per] {
			acc[i] += float64(v)
		}
	}
	for kp := range j.ks {
		for o := range s.O {
			j.dw[o*j.ks+kp] = float32(acc[kp*s.O+o])
		}
	}
}

// dwWeightParts accumulates the partial gradients of parts [lo, hi).
func (j *convJob) dwWeightParts(lo, hi int) {
	s := &j.s
	D, H, W, C, O := s.In[0], s.In[1], s.In[2], s.C, s.O
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	KH, KW := s.Kernel[1], s.Kernel[2]
	m := j.og
	per := j.ks * O
	for part := lo; part < hi; part++ {
		acc := j.partial[part*per : (part+1)*per]
		clear(acc)
		for r := part * j.partRows; r < min((part+1)*j.partRows, j.rows); r++ {
			n, od, oh := r/(OD*OH), r/OH%OD, r%OH
			for ow := range OW {
				p := r*OW + ow
				dyrow := j.dy[p*O : (p+1)*O]
				for kd := range s.Kernel[0] {
					id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
					if id < 0 || id >= D {
						continue
					}
					for kh := range KH {
						ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
						if ih < 0 || ih >= H {
							continue
						}
						for kw := range KW {
							iw := ow*s.Stride[2] - s.Pad[2] + kw*s.Dil[2]
							if iw < 0 || iw >= W {
								continue
							}
							src := ((n*D+id)*H+ih)*W + iw
							kp := (kd*KH+kh)*KW + kw
							xrow, arow := j.x[src*C:(src+1)*C], acc[kp*O:(kp+1)*O]
							if m == 1 {
								convOps.mulAddTo(arow, dyrow, xrow)
								continue
							}
							for c, xv := range xrow {
								for q := c * m; q < (c+1)*m; q++ {
									arow[q] += dyrow[q] * xv
								}
							}
						}
					}
				}
			}
		}
	}
}
