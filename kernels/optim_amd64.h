// Steps shared by the optimizer kernels (sgd, adam, adagrad, lamb and their
// split-bfloat16 forms). Each kernel's header says which register holds
// what; a macro here names in its arguments the registers that differ
// between the kernels using it and fixes the ones they agree on. The
// arguments a kernel reads from its frame stay in the kernel's own TEXT
// body, where go vet's asmdecl check sees them.

// CASE: jump to lbl when the option flags in R10 are v.
#define CASE(v, lbl) CMPQ R10, $v; JEQ lbl
