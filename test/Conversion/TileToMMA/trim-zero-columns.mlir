// convert-tile-to-mma trim-zero-columns (on by default; tesselc --no-trim-zero-columns for the full steps): a dot summed along its B
// block's columns (S = Q·Kᵀ) runs k steps only over the columns the block's copies fill. Here
// the naive causal kernel of test/python/attention_kernels.py with blocks 128 wide over
// descriptors of 96 columns (a head dim padded inside the kernel, the kernels' DB): the copies
// zero-fill columns 96-127, so S takes 6 of its 8 k steps; P·V, summed along V's rows (keys),
// keeps its own. sm_90a (warp-specialized, wgmma): S's m64n64k16 steps 24 -> 18, P·V's
// m64n128k16 12 -> 12; sm_80 (mma.sync): 512 -> 448 m16n8k16 (S's half 256 -> 192). 0 spill.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import sys; sys.path.insert(0, '%S/../../python'); from attention_kernels import naive_attention_kernel as k; print(k('f16', 'causal', 128, 64, 128).replace('shape [%%nq, %%d]', 'shape [%%nq, %%d96]').replace('shape [%%nk, %%d]', 'shape [%%nk, %%d96]').replace('%%d = arith.constant 128 : i32', '%%d = arith.constant 128 : i32\n  %%d96 = arith.constant 96 : i32'))" > %t/k.mlir
// RUN: FileCheck %s --check-prefix=IR --input-file=%t/k.mlir
// RUN: tessel-opt %t/k.mlir --tile-optimize -o %t/opt.mlir
// RUN: tesselc %t/opt.mlir --chip=sm_90a --codegen=wgmma --no-trim-zero-columns --no-trim-output-columns --emit=ptx -o %t/full.ptx
// RUN: tesselc %t/opt.mlir --chip=sm_90a --codegen=wgmma --no-trim-output-columns --emit=ptx -o %t/trim.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=WS
// RUN: tesselc %t/opt.mlir --chip=sm_80 --codegen=mma --no-trim-zero-columns --no-trim-output-columns --emit=ptx -o %t/mfull.ptx
// RUN: tesselc %t/opt.mlir --chip=sm_80 --codegen=mma --no-trim-output-columns --emit=ptx -o %t/mtrim.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: python3 -c "c = lambda f, s: open('%t/' + f).read().count(s); assert (c('full.ptx', 'm64n64k16'), c('trim.ptx', 'm64n64k16')) == (24, 18); assert c('full.ptx', 'm64n128k16') == c('trim.ptx', 'm64n128k16') == 12; assert (c('mfull.ptx', 'm16n8k16'), c('mtrim.ptx', 'm16n8k16')) == (512, 448)"
// trim-output-columns (on by default; tesselc --no-trim-output-columns above): P·V, V read as
// stored, computes the 96 output columns V's copies fill — wgmma's N 128 -> 96 (12 m64n96k16,
// no m64n128k16); mma.sync keeps its n tiles (448, as above).
// RUN: tesselc %t/opt.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o %t/out.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=WS
// RUN: tesselc %t/opt.mlir --chip=sm_80 --codegen=mma --emit=ptx -o %t/mout.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: python3 -c "c = lambda f, s: open('%t/' + f).read().count(s); assert (c('out.ptx', 'm64n64k16'), c('out.ptx', 'm64n96k16'), c('out.ptx', 'm64n128k16')) == (18, 12, 0); assert c('mout.ptx', 'm16n8k16') == 448"

// IR: %kd = tile.make_desc %k[%kv_off], shape [%nk, %d96], strides [%d, %c1]
// WS: ptxas sm_90a attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// MMA: ptxas sm_80 attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
