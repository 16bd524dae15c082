// Package nn builds models out of modules: layers that own parameters and
// buffers, initialised as PyTorch initialises them and named as PyTorch
// names them, so state dicts move between Kiln and PyTorch unchanged.
//
// A module is any type that embeds Base and registers its parameters,
// buffers and submodules under their PyTorch names. Modules with a single
// input implement Layer and can be chained in a Sequential.
package nn
