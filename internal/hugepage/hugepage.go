// Package hugepage asks the operating system to back large allocations
// with huge pages. An embedding table of 25 MB read at random rows touches
// a different 4 KiB page at almost every lookup, far more pages than the
// TLB holds, and each miss is a page walk; in 2 MiB pages all of DLRM's
// 26 tables fit the TLB. On Linux, transparent huge pages in "madvise"
// mode (a common default) give huge pages only to memory advised with
// MADV_HUGEPAGE before it is first touched; elsewhere Advise does nothing.
package hugepage

// MinBytes is the smallest allocation worth advising: below a few huge
// pages the aligned interior is small, and the system call costs more
// than the page walks it saves.
const MinBytes = 8 << 20
