package tui

// TrimAfter is trimAfter, for the external benchmarks that measure an
// idle server.
const TrimAfter = trimAfter
