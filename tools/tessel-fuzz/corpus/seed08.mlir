func.func @loop_if(%out: !tile.ptr<i32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %out, shape [%n], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %s = scf.for %k = %c0 to %i step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
      %a = arith.addi %acc, %k : i32
      scf.yield %a : i32
    }
    %c2 = arith.constant 2 : i32
    %odd = arith.remsi %i, %c2 : i32
    %isodd = arith.cmpi eq, %odd, %c1 : i32
    %v = scf.if %isodd -> (i32) {
      %neg = arith.subi %c0, %s : i32
      scf.yield %neg : i32
    } else {
      scf.yield %s : i32
    }
    %t = tile.splat %v : i32 -> tensor<1xi32>
    tile.store %d[%i], %t : !tile.desc<1, i32>, tensor<1xi32>
  }
  return
}
