// Line coverage of the Kotlin kit from a JaCoCo exec file, for tools/kit/never_run.py.
// Run as a single-file program (JDK 11+) against Debian's libjacoco-java:
//   java -cp org.jacoco.core.jar:asm.jar:asm-commons.jar:asm-tree.jar tools/kit/JacocoLines.java JAR EXEC...
// Prints one line per source line that holds bytecode: SOURCEFILE \t LINE \t STATUS \t CLASS.METHOD,
// STATUS being run (some instruction ran) or never (none did). JaCoCo's own filters apply (Kotlin
// inline functions, synthetic accessors, data-class methods, ...).
import java.io.FileInputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import org.jacoco.core.analysis.Analyzer;
import org.jacoco.core.analysis.CoverageBuilder;
import org.jacoco.core.analysis.IClassCoverage;
import org.jacoco.core.analysis.ICounter;
import org.jacoco.core.analysis.IMethodCoverage;
import org.jacoco.core.tools.ExecFileLoader;

public class JacocoLines {
    public static void main(String[] args) throws Exception {
        ExecFileLoader loader = new ExecFileLoader();
        for (int i = 1; i < args.length; i++) loader.load(new java.io.File(args[i]));
        CoverageBuilder builder = new CoverageBuilder();
        Analyzer analyzer = new Analyzer(loader.getExecutionDataStore(), builder);
        try (ZipInputStream zip = new ZipInputStream(new FileInputStream(args[0]))) {
            ZipEntry entry;
            while ((entry = zip.getNextEntry()) != null) {
                String name = entry.getName();
                if (name.startsWith("dev/edgem3/") && name.endsWith(".class")) {
                    analyzer.analyzeClass(zip.readAllBytes(), name);
                }
            }
        }
        StringBuilder out = new StringBuilder();
        for (IClassCoverage cls : builder.getClasses()) {
            String owner = cls.getName().substring(cls.getName().lastIndexOf('/') + 1);
            for (IMethodCoverage method : cls.getMethods()) {
                for (int line = method.getFirstLine(); line >= 0 && line <= method.getLastLine(); line++) {
                    ICounter counter = method.getLine(line).getInstructionCounter();
                    if (counter.getTotalCount() == 0) continue;
                    out.append(cls.getSourceFileName()).append('\t').append(line).append('\t')
                       .append(counter.getCoveredCount() > 0 ? "run" : "never").append('\t')
                       .append(owner).append('.').append(method.getName()).append('\n');
                }
            }
        }
        System.out.print(out);
    }
}
