package rexd

// KeepFinished is keepFinished for the tests of package rexd_test.
const KeepFinished = keepFinished
