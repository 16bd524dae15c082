// Package spanalloc places blocks of any size inside a few large regions
// of memory, as a caching allocator does inside the memory it has mapped:
// a block is cut from the best-fitting free span, and a freed block
// merges with the free spans beside it, so memory freed by blocks of one
// size serves blocks of others. It deals in offsets only; the caller owns
// the regions' memory.
//
// Placement prefers memory already used: a region's pages are resident
// once touched, so of the spans a block fits in, the allocator takes the
// one that touches the fewest new bytes, then the smallest, then the
// lowest. A region's high-water mark (Touched) is therefore what it costs
// in resident memory.
package spanalloc

import (
	"fmt"
	"slices"
)

// A Block is a placed block: Size bytes at Off in region Region.
type Block struct {
	Region, Off, Size int
}

// An Allocator places blocks in its regions. The zero value has no
// regions. It is not safe for concurrent use.
type Allocator struct {
	regions []region // by id; a removed region has size 0
	free    []Block  // free spans, ordered by region, then offset
	touched int64    // the sum of the regions' high-water marks
}

type region struct {
	size int
	top  int // the high-water mark: bytes at [0, top) have been handed out
	used int // bytes handed out now
}

// AddRegion adds a region of size bytes, all free, and returns its id:
// that of a removed region if there is one, so that ids stay few however
// often regions come and go.
func (a *Allocator) AddRegion(size int) int {
	if size <= 0 {
		panic(fmt.Sprintf("spanalloc: region of %d bytes", size))
	}
	id := slices.IndexFunc(a.regions, func(r region) bool { return r.size == 0 })
	if id < 0 {
		id = len(a.regions)
		a.regions = append(a.regions, region{})
	}
	a.regions[id] = region{size: size}
	i, _ := a.find(id, 0)
	a.free = slices.Insert(a.free, i, Block{Region: id, Size: size})
	return id
}

// RemoveRegion forgets region id, which must be wholly free.
func (a *Allocator) RemoveRegion(id int) {
	r := &a.regions[id]
	if r.size == 0 || r.used != 0 {
		panic(fmt.Sprintf("spanalloc: removing region %d with %d bytes in use", id, r.used))
	}
	i, _ := a.find(id, 0)
	a.free = slices.Delete(a.free, i, i+1)
	a.touched -= int64(r.top)
	*r = region{}
}

// FreeRegions returns the ids of the regions that are wholly free.
func (a *Allocator) FreeRegions() []int {
	var ids []int
	for id, r := range a.regions {
		if r.size > 0 && r.used == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// Touched returns the bytes below the regions' high-water marks: the
// memory the regions have ever handed out.
func (a *Allocator) Touched() int64 { return a.touched }

// InUse returns the bytes handed out and not freed.
func (a *Allocator) InUse() int64 {
	var n int64
	for _, r := range a.regions {
		n += int64(r.used)
	}
	return n
}

// Alloc places a block of size bytes, raising the high-water marks by at
// most grow bytes in all (grow < 0: any), and reports whether it found
// room.
func (a *Allocator) Alloc(size int, grow int64) (Block, bool) {
	if size <= 0 {
		panic(fmt.Sprintf("spanalloc: block of %d bytes", size))
	}
	best, bestGrowth := -1, 0
	for i, s := range a.free {
		if s.Size < size {
			continue
		}
		g := max(s.Off+size-a.regions[s.Region].top, 0)
		if grow >= 0 && int64(g) > grow {
			continue
		}
		if best < 0 || g < bestGrowth || g == bestGrowth && s.Size < a.free[best].Size {
			best, bestGrowth = i, g
		}
	}
	if best < 0 {
		return Block{}, false
	}
	s := &a.free[best]
	b := Block{Region: s.Region, Off: s.Off, Size: size}
	if s.Size == size {
		a.free = slices.Delete(a.free, best, best+1)
	} else {
		s.Off += size
		s.Size -= size
	}
	r := &a.regions[b.Region]
	r.used += size
	if end := b.Off + size; end > r.top {
		a.touched += int64(end - r.top)
		r.top = end
	}
	return b, true
}

// Free returns a block Alloc placed; it merges with the free spans
// beside it.
func (a *Allocator) Free(b Block) {
	r := &a.regions[b.Region]
	if b.Size <= 0 || b.Off < 0 || b.Off+b.Size > r.size || r.used < b.Size {
		panic(fmt.Sprintf("spanalloc: freeing %+v, not a block in use", b))
	}
	r.used -= b.Size
	i, _ := a.find(b.Region, b.Off)
	joinPrev := i > 0 && a.free[i-1].Region == b.Region && a.free[i-1].Off+a.free[i-1].Size == b.Off
	joinNext := i < len(a.free) && a.free[i].Region == b.Region && b.Off+b.Size == a.free[i].Off
	if i < len(a.free) && a.free[i].Region == b.Region && a.free[i].Off < b.Off+b.Size ||
		i > 0 && a.free[i-1].Region == b.Region && a.free[i-1].Off+a.free[i-1].Size > b.Off {
		panic(fmt.Sprintf("spanalloc: freeing %+v, which overlaps free memory", b))
	}
	switch {
	case joinPrev && joinNext:
		a.free[i-1].Size += b.Size + a.free[i].Size
		a.free = slices.Delete(a.free, i, i+1)
	case joinPrev:
		a.free[i-1].Size += b.Size
	case joinNext:
		a.free[i].Off, a.free[i].Size = b.Off, a.free[i].Size+b.Size
	default:
		a.free = slices.Insert(a.free, i, b)
	}
}

// find returns where a free span at region id, offset off is or would be
// in the ordered free list, and whether one starts there.
func (a *Allocator) find(id, off int) (int, bool) {
	return slices.BinarySearchFunc(a.free, Block{Region: id, Off: off}, func(s, t Block) int {
		if s.Region != t.Region {
			return s.Region - t.Region
		}
		return s.Off - t.Off
	})
}
