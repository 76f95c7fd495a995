package codec

// NewZstdHuffman returns the -z compressor with Huffman-coded literals, the
// alternative BenchmarkZstdLiterals measures it against.
func NewZstdHuffman() Compressor { return newZstdWith() }
