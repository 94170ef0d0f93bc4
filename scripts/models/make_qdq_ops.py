#!/usr/bin/python3
"""Small ONNX QDQ graphs, one per int8 pattern whose ONNX Runtime arithmetic rkdeploy's
`--backend int8` reproduces bit for bit (tests/cli/test_quantize.sh): Add, Add + Relu (zero
point -128), Conv and depthwise Conv with int32 bias, per-channel int8 weights.

usage: make_qdq_ops.py OUT_DIR [SEED]   (writes OUT_DIR/{add,addrelu,dw,conv}.onnx, x.npy, y.npy)
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out=sys.argv[1]
os.makedirs(out, exist_ok=True)
rng=np.random.default_rng(int(sys.argv[2]) if len(sys.argv)>2 else 0)
def qdq(name, x, s, z):
    return [h.make_node("QuantizeLinear",[x,name+"_s",name+"_z"],[name+"_q"]), h.make_node("DequantizeLinear",[name+"_q",name+"_s",name+"_z"],[name+"_dq"])], [nh.from_array(np.array(s,np.float32),name+"_s"), nh.from_array(np.array(z,np.int8),name+"_z")]
def model(kind):
    nodes=[];inits=[]
    n,i=qdq("qa","x",0.0371,-5); nodes+=n; inits+=i
    n,i=qdq("qb","y",0.0213,7); nodes+=n; inits+=i
    if kind=="add":
        nodes.append(h.make_node("Add",["qa_dq","qb_dq"],["s"]))
    elif kind=="addrelu":
        nodes.append(h.make_node("Add",["qa_dq","qb_dq"],["s0"])); nodes.append(h.make_node("Relu",["s0"],["s"]))
    elif kind in ("dw","conv"):
        oc, g = (8,8) if kind=="dw" else (8,1)
        w=rng.standard_normal((oc,8//g,3,3)).astype(np.float32); ws=np.abs(w).reshape(oc,-1).max(1)/127
        inits+= [nh.from_array(np.clip(np.round(w/ws[:,None,None,None]),-127,127).astype(np.int8),"w_q"), nh.from_array(ws.astype(np.float32),"w_s"), nh.from_array(np.zeros(oc,np.int8),"w_z")]
        b=rng.standard_normal(oc).astype(np.float32); bs=(np.float32(0.0371)*ws).astype(np.float32)
        inits+= [nh.from_array(np.round(b/bs).astype(np.int32),"bias_q"), nh.from_array(bs,"bias_s"), nh.from_array(np.zeros(oc,np.int32),"bias_z")]
        nodes+= [h.make_node("DequantizeLinear",["w_q","w_s","w_z"],["w"],axis=0), h.make_node("DequantizeLinear",["bias_q","bias_s","bias_z"],["bb"],axis=0),
                 h.make_node("Conv",["qa_dq","w","bb"],["s"],group=g,pads=[1,1,1,1])]
    n,i=qdq("o","s",0.0457 if kind!="addrelu" else 0.02,3 if kind!="addrelu" else -128); nodes+=n; inits+=i
    g=h.make_graph(nodes,kind,[h.make_tensor_value_info("x",T.FLOAT,[1,8,16,16]),h.make_tensor_value_info("y",T.FLOAT,[1,8,16,16])],[h.make_tensor_value_info("o_dq",T.FLOAT,[1,8,16,16])],inits)
    m=h.make_model(g,opset_imports=[h.make_opsetid("",17)]); m.ir_version=8; onnx.save(m,os.path.join(out,kind+".onnx"))
for k in ["add","addrelu","dw","conv"]: model(k)
np.save(os.path.join(out,"x.npy"),(rng.standard_normal((1,8,16,16))*2).astype(np.float32)); np.save(os.path.join(out,"y.npy"),(rng.standard_normal((1,8,16,16))*1.5).astype(np.float32))
