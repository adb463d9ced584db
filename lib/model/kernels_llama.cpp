// LLaMA-family CPU kernels (placeholder).
// second line
