func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>, %o: !tile.ptr<f32>,
                     %lse: !tile.ptr<f32>, %lens: !tile.ptr<i32>, %m: i32, %nkv: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cD = arith.constant 16 : i32
  %cBN = arith.constant 32 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %cD : i32
  %dq = tile.make_desc %q, shape [%m, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dk = tile.make_desc %k, shape [%nkv, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dv = tile.make_desc %v, shape [%nkv, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %do = tile.make_desc %o, shape [%m, %cD], strides [%cD, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dl = tile.make_desc %lse, shape [%m], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dn = tile.make_desc %lens, shape [%m], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %qt = tile.load %dq[%row, %c0] : !tile.desc<2, f16> -> tensor<16x16xf16>
  %len = tile.load %dn[%row] : !tile.desc<1, i32> -> tensor<16xi32>
  %len2 = tile.expand_dims %len axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %lenb = tile.broadcast %len2 : tensor<16x1xi32> -> tensor<16x32xi32>
  %nkvs = tile.splat %nkv : i32 -> tensor<16x32xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0.0> : tensor<16x32xf32>
  %scale = arith.constant dense<0.25> : tensor<16x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<16x16xf32>
  %lse0 = arith.constant dense<0.0> : tensor<16xf32>
  %r:2 = scf.for %j = %c0 to %nkv step %cBN iter_args(%acc = %acc0, %l = %lse0)
      -> (tensor<16x16xf32>, tensor<16xf32>) : i32 {
    %kt = tile.load %dk[%j, %c0] : !tile.desc<2, f16> -> tensor<32x16xf16>
    %ktt = tile.trans %kt : tensor<32x16xf16> -> tensor<16x32xf16>
    %s0 = tile.dot %qt, %ktt, %zero : tensor<16x16xf16>, tensor<16x32xf16> -> tensor<16x32xf32>
    %s1 = arith.mulf %s0, %scale : tensor<16x32xf32>
    %js = tile.splat %j : i32 -> tensor<32xi32>
    %io = tile.iota : tensor<32xi32>
    %kv = arith.addi %js, %io : tensor<32xi32>
    %kv2 = tile.expand_dims %kv axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %kvb = tile.broadcast %kv2 : tensor<1x32xi32> -> tensor<16x32xi32>
    %m1 = arith.cmpi sge, %kvb, %nkvs : tensor<16x32xi32>
    %m2 = arith.cmpi sge, %kvb, %lenb : tensor<16x32xi32>
    %mask = arith.ori %m1, %m2 : tensor<16x32xi1>
    %s = arith.select %mask, %ninf, %s1 : tensor<16x32xi1>, tensor<16x32xf32>
    %p, %ls = tile.softmax %s axis 1 streamed : tensor<16x32xf32> -> tensor<16xf32>
    %vt = tile.load %dv[%j, %c0] : !tile.desc<2, f16> -> tensor<32x16xf16>
    %vf = arith.extf %vt : tensor<32x16xf16> to tensor<32x16xf32>
    %acc2 = tile.dot %p, %vf, %acc : tensor<16x32xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
    scf.yield %acc2, %ls : tensor<16x16xf32>, tensor<16xf32>
  }
  tile.store %do[%row, %c0], %r#0 : !tile.desc<2, f32>, tensor<16x16xf32>
  tile.store %dl[%row], %r#1 : !tile.desc<1, f32>, tensor<16xf32>
  return
}
