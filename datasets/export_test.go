package datasets

// Allocated lets the external tests measure allocation the same way.
var Allocated = allocated
