"""The report's static text: the Content-Security-Policy, the style sheet, and the two scripts
(one installed first that counts errors, one last that sorts tables and sums the page up)."""

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")


# ---------------------------------------------------------------------------------------------
# The page's style sheet and scripts

CSS = """
:root{--fg:#1f2328;--mut:#59636e;--line:#d1d9e0;--soft:#eef1f4;--bg2:#f6f8fa;--red:#cf222e;
--redbg:#ffebe9;--green:#1a7f37;--greenbg:#dafbe1;--amber:#9a6700;--amberbg:#fff8c5;
--blue:#0969da;--bluebg:#ddf4ff}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--fg);background:#fff;font:13px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans",sans-serif}
main{max-width:1400px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:20px;margin:0 0 2px;font-weight:650}
h2{font-size:16px;margin:30px 0 10px;padding-bottom:5px;border-bottom:1px solid var(--line);
font-weight:650}
h2 .num{color:var(--mut);font-weight:400;margin-right:6px}
h3{font-size:13px;margin:18px 0 6px;font-weight:600}
figure h3{margin:0 0 4px}
code,.mono{font-family:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,"Liberation Mono",
"DejaVu Sans Mono",monospace;font-size:11.5px}
p{margin:6px 0}
.sub{color:var(--mut);font-weight:400}
.inputs{color:var(--mut);margin:0 0 10px}
nav.toc{position:sticky;top:0;z-index:5;background:rgba(255,255,255,.96);border-bottom:1px solid
var(--line);padding:6px 0;margin:0 0 6px;display:flex;flex-wrap:wrap;gap:4px 14px}
nav.toc a{color:var(--blue);text-decoration:none;font-size:12.5px}
nav.toc a.off{color:var(--mut)}
nav.toc a:hover{text-decoration:underline}
.absent{color:var(--mut);font-style:italic}
section.absent-section h2{color:var(--mut)}
.verdict{display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 18px;padding:10px 14px;
border-radius:6px;border:1px solid var(--line);border-left-width:6px;margin:8px 0 10px}
.verdict .vword{font-size:20px;font-weight:700;letter-spacing:.02em}
.verdict .vexit{font-family:ui-monospace,Menlo,Consolas,monospace;color:var(--mut)}
.v-ok{border-left-color:var(--green)}.v-ok .vword{color:var(--green)}
.v-bad{border-left-color:var(--red);background:#fffafa}.v-bad .vword{color:var(--red)}
.v-warn{border-left-color:var(--amber);background:#fffdf2}.v-warn .vword{color:var(--amber)}
.tiles{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0 10px}
.tile{border:1px solid var(--line);border-radius:6px;padding:4px 12px 5px;min-width:88px}
.tile .n{font-size:19px;font-weight:650;font-variant-numeric:tabular-nums}
.tile .l{font-size:11px;color:var(--mut)}
.tnote{align-self:flex-end;font-size:11px;color:var(--mut)}
.tile.t-bad{border-color:#ffb8b0;background:var(--redbg)}.tile.t-bad .n{color:var(--red)}
.tile.t-good{border-color:#aceebb;background:var(--greenbg)}.tile.t-good .n{color:var(--green)}
.stat,.files,.facts{color:var(--fg);max-width:1200px}
.files{color:var(--mut)}
.refuse{background:var(--amberbg);border:1px solid #eac54f;padding:6px 10px;border-radius:6px}
ul.notes{margin:4px 0;padding-left:18px;color:var(--mut)}
.tw{overflow-x:auto;max-width:100%;margin:4px 0 6px}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
th,td{padding:2px 9px;border-bottom:1px solid var(--soft);text-align:left;vertical-align:top;
white-space:nowrap}
td.note{white-space:normal;min-width:180px;max-width:520px;color:var(--mut)}
th{background:var(--bg2);font-weight:600;border-bottom:1px solid var(--line);position:sticky;
top:0}
th.num,td.num{text-align:right}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:hover{background:#eaeef2}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2";font-size:9px}
table.sortable th[aria-sort=descending]::after{content:" \\25BC";font-size:9px}
tbody tr:hover td{background:#f6f8fa}
tr.v-regression td:first-child{box-shadow:inset 3px 0 var(--red)}
tr.v-improvement td:first-child{box-shadow:inset 3px 0 var(--green)}
tr.v-regression td.num:nth-child(5){color:var(--red);font-weight:600}
tr.v-improvement td.num:nth-child(5){color:var(--green);font-weight:600}
tr.differs td{background:#fff8e5}
input.toggle{margin:0 5px 0 0;vertical-align:-2px}
input.toggle+label{color:var(--mut);font-size:12px}
#show-quiet:not(:checked)~.tw tr.quiet{display:none}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:600;
line-height:17px;background:var(--soft);color:var(--mut)}
.b-regression,.b-broken,.b-refuse{background:var(--redbg);color:var(--red)}
.b-improvement,.b-fixed{background:var(--greenbg);color:var(--green)}
.b-noise,.b-not-comparable,.b-differs{background:var(--amberbg);color:var(--amber)}
.b-acknowledged,.b-added,.b-unit-converted{background:var(--bluebg);color:var(--blue)}
.caption,figcaption{font-size:11.5px;color:var(--mut);margin:4px 0}
figcaption code{font-size:11px;color:var(--fg)}
code.cmd{user-select:all;background:var(--bg2);padding:0 3px;border-radius:3px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(470px,1fr));gap:10px;
margin:6px 0}
.grid.g2{grid-template-columns:repeat(auto-fill,minmax(640px,1fr))}
.grid.g1{grid-template-columns:1fr}
td.subj{max-width:250px;overflow:hidden;text-overflow:ellipsis}
table.events td.note{min-width:200px;max-width:420px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px 10px;min-width:0}
figure.wide{margin:10px 0}
figure.v-regression{border-left:3px solid var(--red)}
figure.v-improvement{border-left:3px solid var(--green)}
details{margin:6px 0 12px}
summary{cursor:pointer;color:var(--blue);font-size:12px}
svg.chart{display:block;max-width:100%;height:auto;overflow:visible}
svg.chart text{font-size:10.5px;fill:#57606a;font-family:inherit}
svg.chart text.axt{fill:#1f2328;font-weight:600}
svg.chart text.lab,svg.chart text.rl{fill:#1f2328}
svg.chart text.cx{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:9.5px}
svg.chart text.pk{fill:#1f2328;font-size:9.5px}
svg.chart text.evl{font-size:10px;font-weight:600}
svg.chart tspan.k{fill:#8c959f;font-size:9.5px}
svg.chart .grid{stroke:#e6e9ed;stroke-width:1}
svg.chart .axis{stroke:#8c959f;stroke-width:1}
svg.chart .tick{stroke:#8c959f}
svg.chart .thr{fill:#eaeef2;opacity:.7}
svg.chart .median{stroke-width:2.5}
svg.chart .line{fill:none;stroke:#0969da;stroke-width:1.6}
svg.chart .sline{fill:none;stroke-width:1.8}
svg.chart .point{fill:#0969da}
svg.chart .sample{fill:#8c959f;opacity:.45}
svg.chart .seg{stroke:#1f2328;stroke-width:2;opacity:.35}
svg.chart .outlier{fill:none;stroke-width:1.6}
svg.chart .event{stroke-width:1.4}
svg.chart .recovered{fill:#cf222e;opacity:.06}
svg.chart .peak{stroke:#1f2328;stroke-width:2}
svg.chart .roof{fill:none;stroke:#1f2328;stroke-width:1.5;stroke-dasharray:6 3}
svg.chart .fwd{fill:#4e79a7}
svg.chart .bwd{fill:#a0cbe8}
footer{margin-top:40px;color:var(--mut);font-size:11.5px;border-top:1px solid var(--line);
padding-top:8px}
@media print{nav.toc{position:static}th{position:static}}
"""

# Installed before anything else runs: counts script errors, console.error calls and CSP
# violations (a network reference the CSP blocked) so a headless browser test can read them.
JS_HEAD = """(function(){var s={errors:0,csp:0};window.__tbd=s;
window.addEventListener('error',function(){s.errors++;},true);
window.addEventListener('unhandledrejection',function(){s.errors++;});
document.addEventListener('securitypolicyviolation',function(){s.csp++;});
var ce=console.error;console.error=function(){s.errors++;return ce.apply(console,arguments);};
})();"""

# Table sorting (click or Enter on a header; numbers sort by data-v), then a summary of the
# page written into <body data-*>: charts, charts drawn (a .mark with a non-empty box),
# errors. With #tbd-selftest in the URL it also sorts every numeric column both ways, checks
# the order and puts the rows back.
JS_TAIL = """(function(){
function key(td){if(!td)return[2,''];var v=td.getAttribute('data-v');
if(v!==null&&v!==''){var f=parseFloat(v);if(!isNaN(f))return[0,f];}
return[1,td.textContent.trim().toLowerCase()];}
function cmp(a,b){if(a[0]!==b[0])return a[0]-b[0];return a[1]<b[1]?-1:a[1]>b[1]?1:0;}
function sortBy(t,ths,th,i){var asc=th.getAttribute('aria-sort')!=='ascending';
for(var j=0;j<ths.length;j++)ths[j].removeAttribute('aria-sort');
th.setAttribute('aria-sort',asc?'ascending':'descending');
var tb=t.tBodies[0],rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var r=cmp(key(a.cells[i]),key(b.cells[i]));return asc?r:-r;});
for(var k=0;k<rows.length;k++)tb.appendChild(rows[k]);return asc;}
var tables=document.querySelectorAll('table.sortable');
Array.prototype.forEach.call(tables,function(t){if(!t.tHead)return;var ths=t.tHead.rows[0].cells;
Array.prototype.forEach.call(ths,function(th,i){th.tabIndex=0;th.title='sort';
th.addEventListener('click',function(){sortBy(t,ths,th,i);});
th.addEventListener('keydown',function(e){if(e.key==='Enter')sortBy(t,ths,th,i);});});});
function selftest(){var checked=0,failed=0;
Array.prototype.forEach.call(tables,function(t){if(!t.tHead||t.tBodies[0].rows.length<2)return;
var ths=t.tHead.rows[0].cells,orig=Array.prototype.slice.call(t.tBodies[0].rows);
Array.prototype.forEach.call(ths,function(th,i){
if(!th.classList.contains('num'))return;for(var pass=0;pass<2;pass++){
var asc=sortBy(t,ths,th,i);checked++;var rows=t.tBodies[0].rows;for(var k=1;k<rows.length;k++){
var c=cmp(key(rows[k-1].cells[i]),key(rows[k].cells[i]));if(asc?c>0:c<0){failed++;break;}}}});
for(var j=0;j<ths.length;j++)ths[j].removeAttribute('aria-sort');
for(var k=0;k<orig.length;k++)t.tBodies[0].appendChild(orig[k]);});
document.body.setAttribute('data-sort-checked',checked);
document.body.setAttribute('data-sort-failed',failed);}
function summary(){var charts=document.querySelectorAll('svg.chart'),drawn=0,marks=0;
Array.prototype.forEach.call(charts,function(svg){var r=svg.getBoundingClientRect();
var ms=svg.querySelectorAll('.mark');marks+=ms.length;if(!(r.width>0&&r.height>0))return;
for(var i=0;i<ms.length;i++){var b=ms[i].getBBox();if(b.width>0&&b.height>0){drawn++;break;}}});
var b=document.body;b.setAttribute('data-charts',charts.length);
b.setAttribute('data-charts-drawn',drawn);b.setAttribute('data-marks',marks);
b.setAttribute('data-tables-sortable',tables.length);
b.setAttribute('data-errors',window.__tbd.errors);
b.setAttribute('data-csp-violations',window.__tbd.csp);}
if(location.hash==='#tbd-selftest')selftest();
summary();window.addEventListener('load',summary);
})();"""
