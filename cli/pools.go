package cli

import (
	"fmt"

	"github.com/kilnml/kiln/kernels"
)

// instancePools makes n pools of perInstance cores each from the cores
// this process may use (physical cores first), each within one NUMA node
// where the nodes have room, or none when perInstance is 0: the instances
// then share the process-wide workers. The caller closes them.
func instancePools(n, perInstance int) ([]*kernels.Pool, error) {
	if perInstance == 0 {
		return nil, nil
	}
	cores, err := kernels.AvailableCores()
	if err != nil {
		return nil, err
	}
	if n*perInstance > len(cores) {
		return nil, usagef("%d instances × %d cores need %d cores; this process may use %d (%v)", n, perInstance, n*perInstance, len(cores), cores)
	}
	groups := coreGroups(cores, perInstance)
	if nodes, err := kernels.NodeCores(); err == nil {
		var local [][]int
		for _, node := range nodes {
			local = append(local, coreGroups(node, perInstance)...)
		}
		if len(local) >= n {
			groups = local
		}
	}
	pools := make([]*kernels.Pool, 0, n)
	for i := range n {
		p, err := kernels.NewPool(groups[i])
		if err != nil {
			closePools(pools)
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		pools = append(pools, p)
	}
	return pools, nil
}

func closePools(pools []*kernels.Pool) {
	for _, p := range pools {
		p.Close()
	}
}

// coreGroups cuts cores into whole groups of size, dropping the rest.
func coreGroups(cores []int, size int) [][]int {
	var out [][]int
	for i := 0; i+size <= len(cores); i += size {
		out = append(out, cores[i:i+size])
	}
	return out
}
