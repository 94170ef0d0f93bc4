// Runs an ONNX model with ONNX Runtime (onnxruntime-node from bench/peers) on one .npy input
// and writes every output as OUT_DIR/<name>.npy (names made file-safe like rkdeploy's):
//   node ort_reference.js MODEL.onnx INPUT_NAME INPUT.npy OUT_DIR
'use strict';
const ort=require(require('path').join(__dirname,'..','..','..','bench','peers','node_modules','onnxruntime-node')); const fs=require('fs');
function readNpy(file){const buf=fs.readFileSync(file);const hlen=buf.readUInt16LE(8);const header=buf.toString('latin1',10,10+hlen);
 const descr=/'descr': '([^']+)'/.exec(header)[1];const shape=/'shape': \(([^)]*)\)/.exec(header)[1].split(',').map(s=>s.trim()).filter(s=>s).map(Number);
 const d=buf.subarray(10+hlen);const ab=d.buffer.slice(d.byteOffset,d.byteOffset+d.byteLength);
 return descr==='<f4'?new ort.Tensor('float32',new Float32Array(ab),shape):new ort.Tensor('int32',new Int32Array(ab),shape);}
(async()=>{const [model,name,inp,outdir]=process.argv.slice(2);
 const s=await ort.InferenceSession.create(model,{intraOpNumThreads:1});
 const r=await s.run({[name]:readNpy(inp)}); fs.mkdirSync(outdir,{recursive:true});
 for(const k of Object.keys(r)){const t=r[k];const f=k.replace(/[\\/:]/g,'_');
  let header=`{'descr': '<f4', 'fortran_order': False, 'shape': (${t.dims.join(', ')}${t.dims.length==1?',':''}), }`;
  while((10+header.length+1)%64)header+=' ';header+='\n';const pre=Buffer.alloc(10);pre.write('\x93NUMPY',0,'latin1');pre[6]=1;pre.writeUInt16LE(header.length,8);
  fs.writeFileSync(outdir+'/'+f+'.npy',Buffer.concat([pre,Buffer.from(header,'latin1'),Buffer.from(t.data.buffer,t.data.byteOffset,t.data.byteLength)]));}
})().catch(e=>{console.error(e);process.exit(1)});
