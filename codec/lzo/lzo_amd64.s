//go:build !purego

#include "textflag.h"

// func compressBlockAMD64(dict *[dictSize]uint16, dst []byte, op int, block []byte, carry int) (newOp, pending int)
//
// compressBlock (compress.go) in assembly; see lzo_amd64.go for why. It
// follows the Go function step by step and writes the same bytes.
//
// Registers, held for the whole block:
//
//	SI   &in[0], where in = block[carry:], the block proper
//	BX   the dictionary
//	DI   &dst[0]
//	R8   ip, the position probed (relative to in, as in the Go code)
//	R9   anchor, the first byte not yet covered by a match
//	R10  limit = len(in) - tailLen: no match starts at or after it
//	R11  op, the output position
//	R12  len(dst): every write is checked against it
//	R13  carry: literals before in still pending; 0 after the first match
//
// AX, CX, DX, R14, R15, X0 and X1 are scratch. The frame is empty and
// nothing is called, so the function is NOSPLIT.
//
// The reads of in stay within it as the Go code's do: the probe reads 4
// bytes at ip < limit; the match length reads 16 bytes at ip+s only
// while ip+s < limit (so at most limit+15 < len(in)); a short literal
// run of n <= 16 bytes, which ends at ip, is read as 16 bytes ending
// before ip+16. A write that would pass len(dst) returns newOp = -1
// instead (it cannot happen with dst of MaxCompressedLen bytes; the Go
// wrapper panics on it as the Go code's bounds checks would).
TEXT ·compressBlockAMD64(SB), NOSPLIT, $0-88
	MOVQ dict+0(FP), BX
	MOVQ dst_base+8(FP), DI
	MOVQ dst_len+16(FP), R12
	MOVQ op+32(FP), R11
	MOVQ block_base+40(FP), SI
	MOVQ block_len+48(FP), R10
	MOVQ carry+64(FP), R13
	ADDQ R13, SI         // SI = &in[0]
	SUBQ R13, R10
	SUBQ $20, R10        // limit = len(in) - tailLen
	XORL R9, R9          // anchor = 0
	MOVL $1, R8          // ip = 1, or 1 + 4 - carry if carry < 4
	MOVL $5, AX
	SUBQ R13, AX
	CMPQ R13, $4
	CMOVQLT AX, R8

next:
	CMPQ R8, R10
	JGE  done

	// The probe loop: hash the 4 bytes at ip, swap ip into the
	// dictionary for the candidate it held, and compare the candidate's
	// 4 bytes. No match: step 1 + (ip-anchor)/32 on.
probe:
	MOVL    (SI)(R8*1), AX
	IMUL3L  $0x1824429d, AX, CX
	SHRL    $18, CX                 // 32 - dictBits
	MOVWLZX (BX)(CX*2), DX          // cand < ip
	MOVW    R8, (BX)(CX*2)
	CMPL    AX, (SI)(DX*1)
	JEQ     found
	MOVQ    R8, CX
	SUBQ    R9, CX
	SHRQ    $5, CX
	LEAQ    1(R8)(CX*1), R8
	CMPQ    R8, R10
	JLT     probe
	JMP     done

found:
	// DX = cand. Write out the ip-anchor+carry literals before the
	// match, from lit = &in[anchor-carry].
	LEAQ (SI)(DX*1), R15  // &in[cand], kept for the match length
	MOVQ R8, CX
	SUBQ R9, CX
	ADDQ R13, CX          // CX = n literals
	JZ   length
	LEAQ (SI)(R9*1), R14
	SUBQ R13, R14         // R14 = lit
	XORL R13, R13         // carry = 0 from here on

	// The header (putLiteralHeader).
	CMPQ CX, $3
	JA   lithdr
	CMPQ R11, $2          // n <= 3: into the SS bits of the match before
	JLT  fail
	ORB  CL, -2(DI)(R11*1)
	JMP  litcopy

lithdr:
	CMPQ CX, $18
	JA   litlong
	CMPQ R11, R12
	JAE  fail
	LEAL -3(CX), AX
	MOVB AL, (DI)(R11*1)
	INCQ R11
	JMP  litcopy

litlong:
	// putLongLength(dst, op, 0, n-18).
	MOVQ CX, AX
	SUBQ $18, AX
	CMPQ R11, R12
	JAE  fail
	MOVB $0, (DI)(R11*1)
	INCQ R11

litzeros:
	CMPQ AX, $255
	JLE  litlast
	CMPQ R11, R12
	JAE  fail
	MOVB $0, (DI)(R11*1)
	INCQ R11
	SUBQ $255, AX
	JMP  litzeros

litlast:
	CMPQ R11, R12
	JAE  fail
	MOVB AL, (DI)(R11*1)
	INCQ R11

litcopy:
	// Copy n bytes from R14 to dst[op:]: 16 bytes at once for a short
	// run where dst has room for them (keeping n), as the Go code does.
	LEAQ (R11)(CX*1), AX
	CMPQ AX, R12
	JA   fail
	CMPQ CX, $16
	JA   litbig
	LEAQ 16(R11), AX
	CMPQ AX, R12
	JA   litbytes
	MOVOU (R14), X0
	MOVOU X0, (DI)(R11*1)
	ADDQ  CX, R11
	JMP   length

litbytes:
	MOVBLZX (R14), AX
	MOVB AX, (DI)(R11*1)
	INCQ R14
	INCQ R11
	DECQ CX
	JNZ  litbytes
	JMP  length

litbig:
	// n > 16: 16 bytes a step while more than 16 are left, then the
	// 16 bytes that end the run (overlapping what the last step wrote).
	MOVOU (R14), X0
	MOVOU X0, (DI)(R11*1)
	ADDQ  $16, R14
	ADDQ  $16, R11
	SUBQ  $16, CX
	CMPQ  CX, $16
	JA    litbig
	MOVOU -16(R14)(CX*1), X0
	ADDQ  CX, R11
	MOVOU X0, -16(DI)(R11*1)

length:
	// The match length n (matchLen): the first differing byte at or
	// after 4, or, if the bytes are equal that far, the first of the
	// word starts 12, 20, 28, ... at or after limit-ip (the Go code
	// compares 8 bytes at a time and stops there). Bytes 4..11 first,
	// as most matches end there.
	LEAQ (SI)(R8*1), R14  // &in[ip]
	MOVQ 4(R14), AX
	XORQ 4(R15), AX
	JZ   long
	BSFQ AX, AX
	SHRQ $3, AX
	ADDQ $4, AX
	JMP  emit

long:
	// CX = s, the next word start (12, 20, ...); AX = n so far.
	MOVL $12, CX
	MOVL $12, AX
	LEAQ (R8)(CX*1), DX
	CMPQ DX, R10
	JGE  emit

longloop:
	// ip+s < limit: compare 16 bytes at s; AX = s + the number of
	// equal bytes among them (16 with the 1<<16 sentinel bit).
	MOVOU    (R14)(CX*1), X0
	MOVOU    (R15)(CX*1), X1
	PCMPEQB  X1, X0
	PMOVMSKB X0, AX
	XORL     $0xffff, AX
	ORL      $0x10000, AX
	BSFL     AX, AX
	ADDQ     CX, AX
	ADDQ     $8, CX
	LEAQ     (R8)(CX*1), DX
	CMPQ     DX, R10
	JGE      clip             // the word at s+8 is not to be compared
	ADDQ     $8, CX
	CMPQ     AX, CX
	JLT      emit             // a difference within the 16 bytes
	LEAQ     (R8)(CX*1), DX
	CMPQ     DX, R10
	JLT      longloop
	JMP      emit             // AX = s+16, at or past limit

clip:
	CMPQ    AX, CX
	CMOVQGT CX, AX            // n = min(n, s+8)

emit:
	// AX = n; the match is at distance dist = ip - cand, 1..0xBFFF.
	MOVQ R14, DX
	SUBQ R15, DX              // dist
	ADDQ AX, R8               // ip += n
	MOVQ R8, R9               // anchor = ip
	CMPQ AX, $8
	JA   notm2
	CMPQ DX, $0x800
	JA   notm2

	// n <= 8, dist <= 0x800: 1LLDDDSS or 01LDDDSS and a distance byte.
	LEAQ 2(R11), CX
	CMPQ CX, R12
	JA   fail
	DECQ DX
	DECQ AX
	SHLQ $5, AX
	MOVQ DX, CX
	ANDQ $7, CX
	SHLQ $2, CX
	ORQ  CX, AX
	MOVB AX, (DI)(R11*1)
	SHRQ $3, DX
	MOVB DX, 1(DI)(R11*1)
	ADDQ $2, R11
	JMP  next

notm2:
	CMPQ DX, $0x4000
	JA   m4
	// 001LLLLL, distance 1..0x4000.
	DECQ DX
	MOVL $0x20, CX            // m3Marker
	CMPQ AX, $33
	JA   m3long
	SUBQ $2, AX
	JMP  short

m3long:
	SUBQ $33, AX
	JMP  longlen

m4:
	// 0001HLLL, distance 0x4001..0xBFFF.
	SUBQ $0x4000, DX
	MOVQ DX, CX
	SHRQ $11, CX
	ANDQ $8, CX
	ORQ  $0x10, CX            // m4Marker | H
	CMPQ AX, $9
	JA   m4long
	SUBQ $2, AX
	JMP  short

m4long:
	SUBQ $9, AX

longlen:
	// putLongLength(dst, op, CX, AX), AX >= 1.
	CMPQ R11, R12
	JAE  fail
	MOVB CX, (DI)(R11*1)
	INCQ R11

lenzeros:
	CMPQ AX, $255
	JLE  lenlast
	CMPQ R11, R12
	JAE  fail
	MOVB $0, (DI)(R11*1)
	INCQ R11
	SUBQ $255, AX
	JMP  lenzeros

lenlast:
	CMPQ R11, R12
	JAE  fail
	MOVB AX, (DI)(R11*1)
	INCQ R11
	JMP  dist14

short:
	// The marker CX with the length AX in its low bits.
	CMPQ R11, R12
	JAE  fail
	ORQ  CX, AX
	MOVB AX, (DI)(R11*1)
	INCQ R11

dist14:
	// The 16-bit little-endian word dist<<2 (SS bits zero).
	LEAQ 2(R11), CX
	CMPQ CX, R12
	JA   fail
	SHLL $2, DX
	MOVW DX, (DI)(R11*1)
	ADDQ $2, R11
	JMP  next

done:
	// Return op and len(in) - anchor + carry.
	MOVQ R11, newOp+72(FP)
	ADDQ $20, R10
	SUBQ R9, R10
	ADDQ R13, R10
	MOVQ R10, pending+80(FP)
	RET

fail:
	MOVQ $-1, newOp+72(FP)
	MOVQ $0, pending+80(FP)
	RET
