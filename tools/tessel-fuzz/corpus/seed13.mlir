func.func @forever() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %big = arith.constant 2000000000 : i32
  scf.for %i = %c0 to %big step %c1 : i32 {
    %x = arith.addi %i, %c1 : i32
  }
  return
}
