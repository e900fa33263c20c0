# Emulates tf32_weight_khalves' index map, load_b's addresses and ldmatrix.x4's lane->register rule,
# and checks every lane's b[j] against the m16n8k8 TF32 B fragment definition.
kCiChunk=8
def check(kWarpsM, kNT, taps=9):
    kWarpsN=8//kWarpsM; kCo=kWarpsN*kNT*8
    # the weight kernel, one chunk, one co tile: element e -> (tap, ci, co)
    img={}
    total=taps*2*kCo*4
    for e in range(total):
        q=e%4; co=e//4%kCo; rest=e//(4*kCo); half=rest%2; tap=rest//2
        img[e]=(tap, 4*half+q, co)
    for warp in range(8):
        wn=warp//kWarpsM
        for tap in range(taps):
            # ldmatrix: lane l gives the address (in floats) of row l%8 of matrix l/8
            for jp in range(kNT//2):
                addr=[]
                for lane in range(32):
                    b_lane=(lane//8%2)*kCo*(kCiChunk//2)+(wn*kNT*8+8*(lane//16)+lane%8)*(kCiChunk//2)
                    a=tap*kCo*kCiChunk+b_lane+jp*16*(kCiChunk//2)
                    assert a%4==0
                    addr.append(a)
                # banks: each matrix's 8 rows distinct 16-byte bank groups
                for m in range(4):
                    banks={(addr[8*m+r]//4)%8 for r in range(8)}
                    assert len(banks)==8
                for lane in range(32):
                    g,t=lane//4,lane%4
                    regs=[img[addr[8*m+g]+t] for m in range(4)]  # word t of row g of matrix m
                    for jj,(r0,r1) in enumerate([(regs[0],regs[1]),(regs[2],regs[3])]):
                        j=2*jp+jj; n=wn*kNT*8+8*j+g
                        assert r0==(tap,t,n), (r0,(tap,t,n))
                        assert r1==(tap,t+4,n), (r1,(tap,t+4,n))
    print("ok", kWarpsM, kNT, "kCo", kCo)
check(4,4); check(8,4); check(4,8); check(4,4,taps=25)
